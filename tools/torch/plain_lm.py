#!/usr/bin/env python3
"""The torch tests' language model (tools/torch/gpt_moe.py's GPT and Batches)
trained by a plain PyTorch loop with no line of dtrace in it: what
`dtrace record -- python plain_lm.py ...` records as it is (docs/torch.md,
"Recording a job as it is"; tests/e2e/record_torch_*.sh).

The loop is an ordinary one: AdamW, gradient clipping, an optimizer step per
--grad-accum micro-batches, optionally a learning-rate scheduler stepped after
each optimizer step (--lr-schedule) and a shuffled torch.utils.data.DataLoader
(--loader) whose order the program seeds. --nondet plants gpt_moe.py's causes
(combine, dispatch-bwd, embed-bwd, head-bwd), the same model with the same
switch as there, so that what `dtrace record` finds here can be compared with
what gpt_moe.py's explicit Recorder finds. It may be given several times, each
switch's causes planted in the same run: `--nondet combine --nondet embed-bwd`
plants the forward's custom op (in every block) and the embedding's backward,
which dtrace bisect finds one after the other by pinning each (issue 40); with
--layers 1 they are two. --print-planted prints their scopes and ops as
dtrace_torch names them (gpt_moe.planted_ops), one JSON line each, in the
order a step runs them, and exits.

Under torchrun (WORLD_SIZE > 1) the ranks are data-parallel replicas over gloo,
their gradients averaged by all_reduce calls written here, or with --ddp by
DistributedDataParallel; --nondet-rank R plants the switches on rank R only.

It prints each step's loss to stderr. Nothing of dtrace is imported: neither
here nor by gpt_moe.py at module level (its Recorder is imported in its main)."""
from __future__ import annotations

import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_moe import CORPUS, GPT, Batches, print_planted  # noqa: E402 (the model beside this file)

SWITCHES = ("combine", "dispatch-bwd", "embed-bwd", "head-bwd")
CONTEXT = 32


class Windows(torch.utils.data.Dataset):
    """The corpus cut into windows of CONTEXT + 1 bytes: (input, target) pairs
    for --loader, the same windows Batches draws from."""

    def __init__(self, data: torch.Tensor):
        self.data = data
        self.count = (len(data) - 1) // CONTEXT

    def __len__(self):
        return self.count

    def __getitem__(self, i):
        window = self.data[i * CONTEXT:i * CONTEXT + CONTEXT + 1]
        return window[:-1], window[1:]


def loader_batches(data: torch.Tensor, batch: int, seed: int):
    """Batches of a DataLoader with shuffle=True, epoch after epoch. Its order
    comes from a generator the program seeds (not from torch's global one, which
    the model's initialization and dropout draw from): --data-seed changes the
    order and nothing else."""
    generator = torch.Generator()
    generator.manual_seed(seed)
    loader = torch.utils.data.DataLoader(Windows(data), batch_size=batch, shuffle=True, drop_last=True,
                                         generator=generator)
    while True:
        yield from loader


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8, help="optimizer steps")
    p.add_argument("--nondet", action="append", default=[], choices=SWITCHES)
    p.add_argument("--nondet-rank", type=int, default=None,
                   help="plant the --nondet switches on this rank only (torchrun jobs)")
    p.add_argument("--seed", type=int, default=1234, help="torch's generator: initialization, dropout")
    p.add_argument("--data-seed", type=int, default=None,
                   help="the order of the data only (default: --seed)")
    p.add_argument("--grad-accum", type=int, default=1, metavar="K",
                   help="K micro-batches, each its own forward and backward, per optimizer step")
    p.add_argument("--lr-schedule", action="store_true",
                   help="torch.optim.lr_scheduler.OneCycleLR, stepped after each optimizer step")
    p.add_argument("--loader", action="store_true",
                   help="draw the batches from a torch.utils.data.DataLoader with shuffle=True "
                        "(else gpt_moe.py's sampler, Batches)")
    p.add_argument("--compile-block", action="store_true",
                   help="torch.compile the first transformer block (torch 2.x)")
    p.add_argument("--ddp", action="store_true",
                   help="under torchrun: DistributedDataParallel averages the gradients instead of the "
                        "all_reduce calls written here")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--startup-delay", type=float, default=0.0, metavar="SECONDS",
                   help="sleep this long at start-up, standing in for what a cluster job pays per launch "
                        "(tools/bench/record.sh, as gpt_moe.py's)")
    p.add_argument("--print-planted", action="store_true",
                   help="print the scope and op of each planted op (the --nondet switches), in the order a step "
                        "runs them, one JSON line each, and exit")
    args = p.parse_args(argv)
    if args.print_planted:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        print_planted(args.nondet, args.layers, (0,) if args.compile_block else (),
                      "module." if args.ddp and world > 1 else "")
        return 0
    if args.grad_accum < 1:
        p.error("--grad-accum must be 1 or more")
    if args.compile_block and not hasattr(torch, "compile"):
        p.error(f"--compile-block needs torch 2.x (torch.compile); this is torch {torch.__version__}")

    if args.startup_delay > 0:
        time.sleep(args.startup_delay)  # every run of the command pays it, replays included
    torch.set_num_threads(args.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:  # under torchrun: data parallel over gloo
        torch.distributed.init_process_group("gloo")
    nondet = args.nondet if args.nondet_rank in (None, rank) else []
    torch.manual_seed(args.seed)
    with open(CORPUS, "rb") as f:
        data = torch.tensor(list(f.read()), dtype=torch.int64)
    model = GPT(d=args.width, layers=args.layers, unordered="combine" in nondet,
                dispatch_unordered="dispatch-bwd" in nondet, embed_unordered="embed-bwd" in nondet,
                head_unordered="head-bwd" in nondet)
    if args.compile_block:  # one compiled region, blocks.0; the rest stays eager
        model.blocks[0] = torch.compile(model.blocks[0])
    if args.ddp and world > 1:  # MoE routing leaves some experts unused in a step
        model = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    scheduler = None
    if args.lr_schedule:
        scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=3e-3, total_steps=args.steps)
    data_seed = (args.seed if args.data_seed is None else args.data_seed) + rank
    if args.loader:
        batches = loader_batches(data, args.batch, data_seed)
    else:
        batches = Batches(data, args.batch, CONTEXT, data_seed, "cpu")

    for step in range(args.steps):
        total = 0.0
        for _ in range(args.grad_accum):
            x, y = next(batches)
            loss = model(x, y) / args.grad_accum
            loss.backward()
            total += loss.item()
        if world > 1 and not args.ddp:
            for param in model.parameters():
                torch.distributed.all_reduce(param.grad)
                param.grad /= world
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad()
        if scheduler is not None:
            scheduler.step()
        print(f"step {step} loss {total:.4f}", file=sys.stderr)
    if world > 1:
        # Not left to the interpreter's teardown, where gloo's threads can
        # abort the process ("terminate called without an active exception").
        torch.distributed.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
