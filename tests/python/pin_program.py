#!/usr/bin/env python3
"""A small program on the dtrace package, written from docs/python.md, with one
nondeterministic kernel, for tests/python/test_pins.py.

fwd/noise's kernel add_noise adds jitter drawn from the operating system (so
every run and every replay differs there) and returns three outputs of three
kinds: y, a writable NumPy array (pinned in place); scale, a Python float;
frozen, a read-only array (both pinned only in what rec.record returns).
fwd/mix reads all three, and the SGD update and the loss follow. Kernels are
recorded only where rec.wants("kernel") says, as docs/python.md allows.

Usage: pin_program.py RUN_DIR CHECKPOINT_DIR [--level L]"""
import argparse
import os

import numpy as np

import dtrace

f32 = np.float32


def add_noise(x):
    jitter = (np.frombuffer(os.urandom(4 * x.size), np.uint32).reshape(x.shape) % 3).astype(f32)
    y = (x + jitter * f32(1e-3)).astype(f32)
    scale = 1.0 + int.from_bytes(os.urandom(2), "little") / 65536
    frozen = y.sum(axis=0, dtype=f32)
    frozen.setflags(write=False)
    return y, scale, frozen


def main():
    p = argparse.ArgumentParser()
    p.add_argument("run_dir")
    p.add_argument("checkpoint_dir")
    p.add_argument("--level", default="layer")
    args = p.parse_args()
    state = {"w": np.ones(4, f32)}
    rec = dtrace.Recorder({"param": state}, run_dir=args.run_dir, checkpoint_dir=args.checkpoint_dir,
                          checkpoint_every=1, level=args.level)
    for step in rec.steps(3):
        x = np.random.default_rng(step).random((8, 4), dtype=f32)
        with rec.step(step, batch=x):
            with rec.scope("fwd"), rec.scope("noise"):
                rec.record("noise", {"x": x}, io="in", level="layer")
                if rec.wants("kernel"):
                    rec.record("add_noise", {"x": x}, io="in", level="kernel")
                y, scale, frozen = add_noise(x)
                if rec.wants("kernel"):  # right after the kernel, before anything reads its outputs
                    out = rec.record("add_noise", {"y": y, "scale": scale, "frozen": frozen}, io="out",
                                     level="kernel")
                    scale, frozen = out["scale"], out["frozen"]
                rec.record("noise", {"y": y, "scale": scale, "frozen": frozen}, io="out", level="layer")
            with rec.scope("fwd"), rec.scope("mix"):
                w = state["w"]
                rec.record("mix", {"y": y, "scale": scale, "frozen": frozen, "w": w}, io="in", level="layer")
                z = (y * w * f32(scale) + frozen).astype(f32)
                if rec.wants("kernel"):
                    rec.record("mul_add", {"y": y, "w": w, "frozen": frozen}, io="in", level="kernel")
                    rec.record("mul_add", {"z": z}, io="out", level="kernel")
                rec.record("mix", {"z": z}, io="out", level="layer")
            state["w"] = (w - f32(0.01) * z.mean(axis=0, dtype=f32)).astype(f32)
            rec.metric("loss", z.sum(dtype=f32))


if __name__ == "__main__":
    main()
