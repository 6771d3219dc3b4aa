#!/usr/bin/env python3
"""Writes a run the way a training job does, for tests of `dtrace watch`.

Copies the rank files of SRC into DST step by step: rank files appear one after
another (the later ones late), every line is written in pieces of a few bytes
with pauses, and one record is written a byte at a time. Options plant what the
tests look for: --flip STEP:RANK changes the hash of that rank's first state
record at STEP, --pause S sleeps after the step holding the flip (the job goes
on running after its divergence), --cut N leaves the last N bytes of the last
file unwritten (a crash mid-line), --garbage STEP writes a malformed line into
rank 0's file after STEP. Writes DST/../writer.done when it has finished.
"""
import argparse
import json
import os
import random
import sys
import time


def main():
    p = argparse.ArgumentParser()
    p.add_argument("src")
    p.add_argument("dst")
    p.add_argument("--flip")
    p.add_argument("--bytewise", default="1:0", help="STEP:RANK whose first record is written byte by byte")
    p.add_argument("--pause", type=float, default=0.0)
    p.add_argument("--cut", type=int, default=0)
    p.add_argument("--garbage", type=int)
    p.add_argument("--delay", type=float, default=0.002, help="pause between pieces")
    a = p.parse_args()
    rnd = random.Random(7)
    names = sorted(n for n in os.listdir(a.src) if n.endswith(".jsonl"))
    # Each file: its header, then its lines grouped by step, in file order.
    files = {}
    for n in names:
        lines = open(os.path.join(a.src, n)).read().splitlines(keepends=True)
        steps = {}
        for line in lines[1:]:
            steps.setdefault(json.loads(line)["step"], []).append(line)
        files[n] = (lines[0], steps)
    flips = [tuple(map(int, f.split(":"))) for f in a.flip.split(",")] if a.flip else []
    bytewise = tuple(map(int, a.bytewise.split(":")))
    os.makedirs(a.dst, exist_ok=True)
    out = {}
    flipped = set()

    def write(f, text, byte_by_byte=False):
        data = text.encode()
        i = 0
        while i < len(data):
            n = 1 if byte_by_byte else rnd.randint(1, 97)
            f.write(data[i:i + n])
            f.flush()
            i += n
            if byte_by_byte or rnd.random() < 0.3:
                time.sleep(a.delay)

    all_steps = sorted({s for _, steps in files.values() for s in steps})
    for step in all_steps:
        for idx, n in enumerate(names):
            header, steps = files[n]
            if n not in out:
                out[n] = open(os.path.join(a.dst, n), "wb")
                write(out[n], header)
            lines = steps.get(step, [])
            for k, line in enumerate(lines):
                rec = json.loads(line)
                rank = rec.get("rank")
                if (step, rank) in flips and rec.get("io") == "state" and "hash" in rec and (step, rank) not in flipped:
                    h = rec["hash"]
                    line = line.replace(h, h[:-1] + ("0" if h[-1] != "0" else "1"))
                    flipped.add((step, rank))
                last_file = idx == len(names) - 1 and step == all_steps[-1] and k == len(lines) - 1
                if last_file and a.cut:
                    write(out[n], line[:-a.cut])
                    continue
                write(out[n], line, byte_by_byte=(step, rank) == bytewise and k == 0)
            if a.garbage is not None and step == a.garbage and idx == 0:
                write(out[n], '{"step": oops\n')
        if flips and step == flips[0][0]:
            time.sleep(a.pause)
    for f in out.values():
        f.close()
    open(os.path.join(os.path.dirname(os.path.abspath(a.dst)), "writer.done"), "w").write(str(time.time()))


if __name__ == "__main__":
    sys.exit(main())
