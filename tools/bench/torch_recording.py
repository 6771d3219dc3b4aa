#!/usr/bin/env python3
"""What dtrace_torch costs: the example GPT-MoE (tools/torch/gpt_moe.py) trained in
one process with and without recording, blocks of steps alternating (in the
order plain, recorded, recorded, plain, ... so that a drifting machine load
weighs on both arms alike), at each level. Prints, per arm, the median step time
as the process's CPU time (time.process_time, one torch thread: what recording
costs, which a machine shared with other jobs blurs less) and as wall time; the
overhead of recording in percent of the plain step by each; the recorder's own
time inside the step (Recorder.record_cpu_seconds and record_seconds: at step
level all of recording's work, measured where it happens, which the difference
of two noisy medians cannot resolve to 1% on a loaded machine); the cost per recorded
tensor of the Python path (CPU overhead / tensors handed to libdtrace); and the
load average before and after, since figures from a loaded machine mean less.

    PYTHONPATH=build/python /usr/bin/python3 tools/bench/torch_recording.py [--width 128 ...]

Step level should stay within 2% of the step on CPU (issue 22); layer and kernel
level are reported. Results go to tools/bench/RESULTS.md by hand."""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time

import torch

import dtrace_torch as dt
import torch_example


def main() -> int:
    p = argparse.ArgumentParser()
    torch_example.add_options(p)
    p.add_argument("--blocks", type=int, default=4, help="alternating blocks per arm")
    p.add_argument("--steps", type=int, default=5, help="steps per block")
    p.add_argument("--levels", default="step,layer,kernel")
    args = p.parse_args()
    model, optimizer, batches = torch_example.build(args)

    def train_step(rec=None, step=0):
        x, y = next(batches)
        ctx = rec.step(step, batch=(x, y)) if rec else None  # the batch recorded, as gpt_moe.py does
        if ctx:
            ctx.__enter__()
        loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if rec:
            rec.metric("loss", loss)
            ctx.__exit__(None, None, None)

    for _ in range(2):  # warm-up: allocator, optimizer state
        train_step()
    scratch = tempfile.mkdtemp(prefix="dtrace-bench-torch-")
    params = sum(p.numel() for p in model.parameters())
    print(f"model: width {args.width}, layers {args.layers}, batch {args.batch}, {params} parameters, "
          f"torch {torch.__version__}, {args.threads} thread(s)")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for level in args.levels.split(","):
        cpu = {"plain": [], "recorded": []}
        wall = {"plain": [], "recorded": []}
        tensors, record_seconds, record_cpu = 0, 0.0, 0.0
        for block in range(args.blocks):
            arms = ("plain", "recorded") if block % 2 == 0 else ("recorded", "plain")
            for arm in arms:
                # A recorder per block, closed after it: its hooks are gone in the plain blocks.
                rec = dt.Recorder(model, optimizer, run_dir=os.path.join(scratch, f"{level}-{block}"),
                                  level=level) if arm == "recorded" else None
                for step in range(args.steps):
                    c, w = time.process_time(), time.perf_counter()
                    train_step(rec, step)
                    cpu[arm].append(time.process_time() - c)
                    wall[arm].append(time.perf_counter() - w)
                if rec is not None:
                    tensors += rec.sink.tensors
                    record_seconds += rec.record_seconds
                    record_cpu += rec.record_cpu_seconds
                    rec.close()
        n = len(cpu["recorded"])
        base, with_rec = statistics.median(cpu["plain"]), statistics.median(cpu["recorded"])
        wbase, wwith = statistics.median(wall["plain"]), statistics.median(wall["recorded"])
        overhead = with_rec - base
        per_tensor = overhead / (tensors / n) if tensors else float("nan")
        print(f"{level:6s}: cpu plain {base * 1e3:8.2f} ms/step, recorded {with_rec * 1e3:8.2f}, "
              f"overhead {100 * overhead / base:6.2f}% ; wall plain {wbase * 1e3:8.2f}, recorded "
              f"{wwith * 1e3:8.2f}, overhead {100 * (wwith - wbase) / wbase:6.2f}% ; recorder's own time "
              f"cpu {record_cpu / n * 1e3:6.2f} ms/step ({100 * record_cpu / n / base:5.2f}% of the plain cpu "
              f"step), wall {record_seconds / n * 1e3:6.2f} ms/step ({100 * record_seconds / n / wbase:5.2f}%) ; "
              f"{tensors / n:7.0f} tensors/step, {per_tensor * 1e6:6.1f} us per recorded tensor "
              f"(own cpu time: {record_cpu / tensors * 1e6 if tensors else float('nan'):5.1f} us)")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
