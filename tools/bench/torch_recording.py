#!/usr/bin/env python3
"""What dtrace_torch costs: the example GPT-MoE (tools/torch/gpt_moe.py) trained in
one process with and without recording, blocks of steps alternating so that both
see the same machine, at each level. Prints the median step time of each arm, the
overhead of recording in percent of the plain step, and the cost per recorded
tensor of the Python path (recording time / tensors handed to libdtrace). Times
are the process's CPU time (time.process_time, one torch thread), so that a
machine shared with other jobs does not blur them as wall-clock time would.

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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import gpt_moe  # noqa: E402
import dtrace_torch as dt  # noqa: E402


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--blocks", type=int, default=4, help="alternating blocks per arm")
    p.add_argument("--steps", type=int, default=5, help="steps per block")
    p.add_argument("--levels", default="step,layer,kernel")
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with open(gpt_moe.CORPUS, "rb") as f:
        data = torch.tensor(list(f.read()), dtype=torch.int64)
    model = gpt_moe.GPT(d=args.width, layers=args.layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    batches = gpt_moe.Batches(data, args.batch, 32, 0, "cpu")

    def train_step(rec=None, step=0):
        x, y = next(batches)
        ctx = rec.step(step) if rec else None
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
    for level in args.levels.split(","):
        plain, recorded, tensors = [], [], 0
        for block in range(args.blocks):
            for _ in range(args.steps):
                t = time.process_time()
                train_step()
                plain.append(time.process_time() - t)
            # A recorder per block, closed after it: its hooks are gone in the plain block.
            rec = dt.Recorder(model, optimizer, run_dir=os.path.join(scratch, f"{level}-{block}"), level=level)
            for step in range(args.steps):
                t = time.process_time()
                train_step(rec, step)
                recorded.append(time.process_time() - t)
            tensors += rec.sink.tensors
            rec.close()
        base, with_rec = statistics.median(plain), statistics.median(recorded)
        overhead = with_rec - base
        per_tensor = overhead / (tensors / len(recorded)) if tensors else float("nan")
        print(f"{level:6s}: plain {base * 1e3:8.2f} ms/step, recorded {with_rec * 1e3:8.2f} ms/step, "
              f"overhead {100 * overhead / base:6.2f}% ; {tensors / len(recorded):7.0f} tensors/step, "
              f"{per_tensor * 1e6:6.1f} us per recorded tensor")
    return 0


if __name__ == "__main__":
    sys.exit(main())
