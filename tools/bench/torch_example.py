"""The example GPT-MoE (tools/torch/gpt_moe.py) as the PyTorch benchmarks set it
up (torch_recording.py, checkpoint_cost.py): one set of options, one model,
optimizer and batch stream, so that their figures are of the same job."""
from __future__ import annotations

import argparse
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "torch"))
import gpt_moe  # noqa: E402


def add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--threads", type=int, default=1)


def build(args: argparse.Namespace):
    """(model, optimizer, batches) of the example, seeded, on the CPU with
    args.threads torch threads."""
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    with open(gpt_moe.CORPUS, "rb") as f:
        data = torch.tensor(list(f.read()), dtype=torch.int64)
    model = gpt_moe.GPT(d=args.width, layers=args.layers)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    return model, optimizer, gpt_moe.Batches(data, args.batch, 32, 0, "cpu")
