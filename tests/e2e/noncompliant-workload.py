#!/usr/bin/env python3
"""A workload that keeps its side of dtrace-replay/1 except in one way.

    noncompliant-workload.py MODE

runs minitrain with the replay argv of run a or run b (files $WORK/argv-a and
$WORK/argv-b, one word per line; the side is read from DTRACE_OUT's name, as
bisect names its outputs layer-A-0.jsonl, isolate-B.jsonl, ...), breaking the
protocol as MODE says, the way a hand-written program gets it wrong:

  ignore-isolate     checks DTRACE_REPLAY_STEP before DTRACE_ISOLATE: an
                     isolation records one whole step instead of repetitions
  ignore-repeat      runs one repetition whatever DTRACE_REPEAT asks
  ignore-occurrence  does not know DTRACE_OCCURRENCE: isolates the first call
  ignore-replay-step records steps 0 and 1 whichever DTRACE_REPLAY_STEP asks
  ignore-level       records at step level when asked for layer level
  no-state           does not record the state it restored
  no-capture         ignores DTRACE_CAPTURE
  ignore-pin         ignores DTRACE_PIN (dtrace-replay/1.3): the op bisect
                     named first keeps varying in the replays that pin it
  alone-repeats      complies, but its isolated op gives one output in every
                     repetition (the op's nondeterminism needs the layer)
"""
import json
import os
import shutil
import subprocess
import sys


def side_argv(side=None):
    # The replay's directory (DTRACE_OUT_DIR, dtrace-replay/1.1) names the side:
    # layer-A-0, isolate-B, ...; DTRACE_OUT is <dir>/replay.jsonl inside it.
    out = os.path.basename(os.environ.get("DTRACE_OUT_DIR", "")) or os.path.basename(
        os.environ.get("DTRACE_OUT", ""))
    side = side or ("a" if "-A" in out else "b")
    with open(os.path.join(os.environ["WORK"], "argv-" + side)) as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def run(argv, env):
    status = subprocess.call(argv, env=env, stdout=subprocess.DEVNULL)
    if status != 0:
        sys.exit(status)


def rewrite(path, keep):
    """Keeps the records for which keep(record) holds, fixing end counts."""
    lines = [json.loads(l) for l in open(path) if l.strip()]
    out, counts = [], {}
    for rec in lines:
        if "end" in rec:
            rec["count"] = counts.get((rec["rank"], rec["step"]), 0)
        elif "scope" in rec:
            if not keep(rec):
                continue
            key = (rec["rank"], rec["step"])
            counts[key] = counts.get(key, 0) + 1
        out.append(rec)
    with open(path, "w") as f:
        for rec in out:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")


def same_outputs_every_repetition(path, capture):
    """Repetition k's outputs become repetition 0's, bytes and all."""
    lines = [json.loads(l) for l in open(path) if l.strip()]
    first = {}
    for rec in lines:
        if rec.get("io") == "out" and rec["step"] == 0:
            first[(rec["rank"], rec["scope"], rec["op"], rec["name"])] = rec
    for rec in lines:
        key = (rec.get("rank"), rec.get("scope"), rec.get("op"), rec.get("name"))
        if rec.get("io") == "out" and rec["step"] > 0 and key in first:
            rec["hash"] = first[key]["hash"]
            src = os.path.join(capture, "r%d-s0-q%d.bin" % (rec["rank"], first[key]["seq"]))
            dst = os.path.join(capture, "r%d-s%d-q%d.bin" % (rec["rank"], rec["step"], rec["seq"]))
            if os.path.exists(src) and os.path.exists(dst):
                os.remove(dst)
                shutil.copyfile(src, dst)
    with open(path, "w") as f:
        for rec in lines:
            f.write(json.dumps(rec, separators=(",", ":")) + "\n")
    index = os.path.join(capture, "capture.jsonl")
    if os.path.exists(index):
        same = [json.loads(l) for l in open(index) if l.strip()]
        for rec in same:
            key = (rec.get("rank"), rec.get("scope"), rec.get("op"), rec.get("name"))
            if rec.get("io") == "out" and rec["step"] > 0 and key in first:
                rec["hash"] = first[key]["hash"]
        with open(index, "w") as f:
            for rec in same:
                f.write(json.dumps(rec, separators=(",", ":")) + "\n")


def main():
    mode = sys.argv[1]
    env = dict(os.environ)
    # This wrapper speaks the single-process form (dtrace-replay/1): minitrain
    # writes DTRACE_OUT, which the modes below rewrite.
    env.pop("DTRACE_OUT_DIR", None)
    isolating = bool(env.get("DTRACE_ISOLATE"))
    op_alone = "::" in env.get("DTRACE_ISOLATE", "")
    # alone-repeats: both sides' op alone behaves as one deterministic op would.
    argv = side_argv("a" if mode == "alone-repeats" and op_alone else None)
    if mode == "ignore-isolate" and isolating:
        for name in ("DTRACE_ISOLATE", "DTRACE_INPUTS", "DTRACE_REPEAT", "DTRACE_OCCURRENCE"):
            env.pop(name, None)
    elif mode == "ignore-repeat" and isolating:
        env["DTRACE_REPEAT"] = "1"
    elif mode == "ignore-occurrence":
        env.pop("DTRACE_OCCURRENCE", None)
    elif mode == "ignore-level" and env.get("DTRACE_LEVEL") == "layer":
        env["DTRACE_LEVEL"] = "step"
    elif mode == "no-capture":
        env.pop("DTRACE_CAPTURE", None)
    elif mode == "ignore-pin":
        env.pop("DTRACE_PIN", None)
    elif mode == "ignore-replay-step" and not isolating and "DTRACE_REPLAY_STEP" in env:
        out = env["DTRACE_OUT"]
        parts = []
        for step in (0, 1):
            part = "%s.step%d" % (out, step)
            run(argv, dict(env, DTRACE_REPLAY_STEP=str(step), DTRACE_OUT=part))
            parts.append(part)
        with open(out, "w") as merged:
            for i, part in enumerate(parts):
                with open(part) as f:
                    lines = f.readlines()
                merged.writelines(lines if i == 0 else lines[1:])
                os.remove(part)
        return
    run(argv, env)
    if mode == "no-state" and not isolating and "DTRACE_OUT" in env:
        rewrite(env["DTRACE_OUT"], lambda rec: rec.get("io") != "state")
    if mode == "alone-repeats" and op_alone:
        same_outputs_every_repetition(env["DTRACE_OUT"], env.get("DTRACE_CAPTURE", ""))


if __name__ == "__main__":
    main()
