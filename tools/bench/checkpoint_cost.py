#!/usr/bin/env python3
"""What checkpoints cost a training step, and so how often a job can afford one
(issue 28 point 5): the example GPT-MoE (tools/torch/gpt_moe.py) trained in one
process, recorded at step level by dtrace_torch, with a checkpoint every K steps
(dtrace_torch's Recorder(checkpoint_every=K): model, optimizer and the data
position, torch.save'd at the start of a step) for K in --every, and without
checkpoints (the baseline, measured in the same run). Arms alternate block by
block (a drifting machine load weighs on all alike); each block is --steps
steps of a fresh recorder and checkpoint directory. Prints, per arm, the median
over blocks of the mean step time (wall and process CPU, checkpoints included),
its ratio to the baseline's, and the checkpoint's size; then the median CPU
time of one step and of one checkpoint, each timed where it runs (on a loaded
machine their ratio says more than two arms' wall times do), and what a
checkpoint every K steps costs by the rule (one checkpoint's time) / (K x
one step's time).

    PYTHONPATH=build/python /usr/bin/python3 tools/bench/checkpoint_cost.py [--every 1,10,100 --steps 200]

Results go to tools/bench/RESULTS.md by hand."""
from __future__ import annotations

import argparse
import os
import shutil
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
    p.add_argument("--every", default="1,10,100", help="checkpoint intervals K to measure")
    p.add_argument("--steps", type=int, default=200, help="steps per block")
    p.add_argument("--blocks", type=int, default=3, help="blocks per arm")
    args = p.parse_args()
    model, optimizer, batches = torch_example.build(args)

    step_cpu, save_cpu, save_wall = [], [], []

    def train(rec: dt.Recorder) -> None:
        # Each checkpoint timed where it is written (Recorder._save), and each
        # step apart from them: on a loaded machine the ratio of these two CPU
        # times says more than the difference of two arms' wall times.
        save = rec._save

        def timed_save(step: int) -> None:
            c, w = time.process_time(), time.perf_counter()
            save(step)
            save_cpu.append(time.process_time() - c)
            save_wall.append(time.perf_counter() - w)

        rec._save = timed_save
        for step in rec.steps(args.steps):
            x, y = next(batches)
            c = time.process_time()
            with rec.step(step):
                loss = model(x, y)
                loss.backward()
                optimizer.step()
                optimizer.zero_grad()
                rec.metric("loss", loss)
            step_cpu.append(time.process_time() - c)

    arms = [0] + [int(k) for k in args.every.split(",")]
    scratch = tempfile.mkdtemp(prefix="dtrace-bench-ckpt-")
    params = sum(p.numel() for p in model.parameters())
    print(f"model: width {args.width}, layers {args.layers}, batch {args.batch}, {params} parameters, "
          f"torch {torch.__version__}, {args.threads} thread(s); {args.steps} steps a block, "
          f"{args.blocks} blocks an arm")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    wall = {k: [] for k in arms}
    cpu = {k: [] for k in arms}
    size = {}
    try:
        for block in range(args.blocks):
            order = arms if block % 2 == 0 else list(reversed(arms))
            for every in order:
                where = os.path.join(scratch, f"{every}-{block}")
                ckpt = os.path.join(where, "ckpt") if every else None
                rec = dt.Recorder(model, optimizer, run_dir=os.path.join(where, "run"), checkpoint_dir=ckpt,
                                  checkpoint_every=every, state={"data": batches}, level="step")
                c, w = time.process_time(), time.perf_counter()
                train(rec)
                cpu[every].append((time.process_time() - c) / args.steps)
                wall[every].append((time.perf_counter() - w) / args.steps)
                if ckpt:
                    files = [os.path.join(d, f) for d, _, fs in os.walk(ckpt) for f in fs]
                    size[every] = (sum(os.path.getsize(f) for f in files), len(files))
                shutil.rmtree(where)
                print(f"  block {block + 1}, every {every or 'none'}: {wall[every][-1] * 1e3:.2f} ms/step wall",
                      file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    base_w, base_c = statistics.median(wall[0]), statistics.median(cpu[0])
    print(f"{'checkpoint':>16} {'wall ms/step':>12} {'/ none':>7} {'cpu ms/step':>12} {'/ none':>7} "
          f"{'checkpoints':>11} {'bytes each':>11}")
    for every in arms:
        w, c = statistics.median(wall[every]), statistics.median(cpu[every])
        label = "none" if every == 0 else f"every {every}"
        count = size.get(every, (0, 0))[1]
        each = size[every][0] // count if count else 0
        print(f"{label:>16} {w * 1e3:12.2f} {w / base_w:7.3f} {c * 1e3:12.2f} {c / base_c:7.3f} "
              f"{count:11d} {each:11d}")
    step_c, save_c = statistics.median(step_cpu), statistics.median(save_cpu)
    print(f"one step: {step_c * 1e3:.2f} ms cpu (median of {len(step_cpu)}); one checkpoint: {save_c * 1e3:.2f} ms "
          f"cpu, {statistics.median(save_wall) * 1e3:.2f} ms wall (median of {len(save_cpu)}): "
          f"{save_c / step_c:.3f} steps")
    for every in arms[1:]:
        print(f"  checkpoint every {every}: about {100 * save_c / (every * step_c):.2f}% of the training time "
              f"(one checkpoint's cpu / ({every} x one step's))")
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
