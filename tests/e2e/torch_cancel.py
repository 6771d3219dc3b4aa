#!/usr/bin/env python3
"""A training step whose custom op sums terms that cancel, in a random order:
e2e/torch_evidence_cancel's workload (dtrace_torch, as a user's script would).

Module `cancel` builds, for each row of h, the terms [h, -h, 1e-6] and sums
them with dtrace_test::row_sum, registered through torch.library, in an order
drawn from the operating system (as atomics add). The exact sum is 1e-6; what
each order gives differs by roundings of the terms (about 1e-7 times |h|), which
is most of the result itself. The op's inputs, not its output, say how large a
rounding can be.

    torch_cancel.py --run-dir DIR --checkpoint-dir DIR [--steps N]
"""
import argparse
import os
import random
import sys

import torch
import torch.nn as nn

_LIB = torch.library.Library("dtrace_test", "DEF")
_LIB.define("row_sum(Tensor terms) -> Tensor")


def _row_sum(terms: torch.Tensor) -> torch.Tensor:
    g = torch.Generator()
    g.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
    order = torch.randperm(terms.shape[1], generator=g)
    out = torch.zeros(terms.shape[0], dtype=terms.dtype)
    for j in order.tolist():  # one term at a time: each order rounds its own way
        out = out + terms[:, j]
    return out


_LIB.impl("row_sum", _row_sum, "CPU")


class RowSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, terms):
        ctx.columns = terms.shape[1]
        return torch.ops.dtrace_test.row_sum(terms)

    @staticmethod
    def backward(ctx, grad):
        return grad.unsqueeze(1).expand(-1, ctx.columns).contiguous()


class Cancel(nn.Module):
    def forward(self, h):
        small = torch.full((h.shape[0], 1), 1e-6, dtype=h.dtype)
        return RowSum.apply(torch.cat([h, -h, small], dim=1))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(16, 64)
        self.cancel = Cancel()

    def forward(self, x):
        h = self.proj(x) * 100.0
        return (self.cancel(h) * 1e3).pow(2).mean() + h.pow(2).mean() * 1e-6


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--run-dir", required=True)
    p.add_argument("--checkpoint-dir", required=True)
    p.add_argument("--steps", type=int, default=1)
    args = p.parse_args()
    # Every generator the recorder records is seeded: only the op's order differs.
    torch.manual_seed(7)
    random.seed(7)
    if "numpy" in sys.modules:  # torch imports it: the recorder records its generator too
        sys.modules["numpy"].random.seed(7)
    torch.set_num_threads(1)
    model = Model()
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    data = torch.randn(8, 16)

    import dtrace_torch as dt
    rec = dt.Recorder(model, optimizer, run_dir=args.run_dir, checkpoint_dir=args.checkpoint_dir,
                      checkpoint_every=1, config={"example": "torch_cancel"})
    for step in rec.steps(args.steps):
        with rec.step(step):
            loss = model(data)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            rec.metric("loss", loss)
    return 0


if __name__ == "__main__":
    sys.exit(main())
