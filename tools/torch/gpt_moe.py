#!/usr/bin/env python3
"""A small GPT-style model with a mixture-of-experts layer, trained on the shipped
corpus (testdata/corpus.txt): dtrace's PyTorch example workload, recorded with
dtrace_torch, with --nondet switches planting causes the seeds name:

  combine       the MoE combine (experts' outputs summed back per token) is a
                custom op registered through torch.library that adds in a random
                order, as atomics do on a GPU (expert-parallel paths);
  dispatch-bwd  the MoE dispatch (tokens gathered for the experts) is a custom
                autograd Function whose backward adds each token's gradients back
                with the combine op in a random order: the forward is exact, only
                the backward is not (the cause lives in a bwd/ scope);
  embed-bwd     the token embedding is a custom autograd Function whose backward
                adds the rows of its weight gradient with the combine op in a
                random order: the forward and the gradient it passes on are
                exact, only the parameter's gradient is not;
  head-bwd      the same in the output head's use of its weight: its backward adds
                each token's contribution to the weight gradient in a random
                order (with --tie-weights the weight is the token embedding's);
  dropout-rng   on resume, the dropout RNG is re-seeded instead of restored;
  data-order    on resume, the data sampler reshuffles instead of restoring its order;
  data-unsaved  the data sampler is left out of the Recorder's state= (neither
                checkpointed nor recorded): a resumed run starts the data over;
  python-rng    on resume, Python's `random` is re-seeded instead of restored (it
                matters where the step draws from it: --python-random);
  index-add     (CUDA) the combine is index_add_ with deterministic algorithms off:
                real atomics;
  scatter-add   (CUDA) the combine is scatter_add_ with deterministic algorithms
                off: real atomics on another op;
  inductor-order  (with --compile or --compile-model) each block ends by scaling
                its output by its root mean square over the whole batch, a
                reduction in plain torch that inductor fuses into a generated
                C++ kernel, which splits its terms among the threads its code
                is generated for: inductor's cpp.threads, 1 or 2, which each
                process picks at random unless --inductor-threads fixes it. Two
                processes so add the same terms in other orders, as inductor's
                split reductions with atomics do on a GPU, while ATen's eager
                kernels stay as they are: the region's graph run eagerly agrees,
                and the generated kernel is the cause (fwd/blocks.<i>/inductor).

--compile (torch 2.x) wraps each transformer block in torch.compile: the
combine op of --nondet combine then runs inside a compiled region, called by
inductor's generated code. --compile-model wraps the whole model instead (one
region, named after the model's class: fwd/GPT).

--nondet may be given several times: each switch plants its causes in the same
run (combine and embed-bwd: one in each block's forward and one in the
embedding's backward, each nondeterministic on its own, as dtrace bisect's
pinned ops find them one after the other). --print-planted prints where each
planted op runs, as dtrace_torch names it (scope and op, in the order a step
runs them; planted_ops), one JSON line each, and exits: the ground truth for
tests.

Under torchrun (WORLD_SIZE > 1) the ranks are data-parallel replicas over gloo,
gradients averaged by all_reduce (or by DistributedDataParallel with --ddp), and
the header names them one replica group; --flip-bit RANK:STEP flips one bit of
that rank's parameters before STEP, a silent data corruption for `dtrace replicas`.

Run `gpt_moe.py --help`. docs/torch.md explains the recording."""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "..", "..", "testdata", "corpus.txt")
SWITCHES = ("combine", "dispatch-bwd", "embed-bwd", "head-bwd", "dropout-rng", "data-order", "data-unsaved",
            "python-rng", "index-add", "scatter-add", "inductor-order")

# ---- the planted custom op ---------------------------------------------------
# dtrace_example::combine(src, index, rows, unordered): out[index[i]] += src[i].
# Ordered, the rows are accumulated in i order (CPU index_add_ is sequential);
# unordered, in a random order drawn from the operating system, not from torch's
# RNG (a run's seed must not make it repeat, as atomics do not).
_LIB = torch.library.Library("dtrace_example", "DEF")
_LIB.define("combine(Tensor src, Tensor index, int rows, bool unordered) -> Tensor")


def _combine(src: torch.Tensor, index: torch.Tensor, rows: int, unordered: bool) -> torch.Tensor:
    out = torch.zeros((rows,) + tuple(src.shape[1:]), dtype=src.dtype, device=src.device)
    if unordered:
        g = torch.Generator(device="cpu")
        g.manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        order = torch.randperm(src.shape[0], generator=g).to(src.device)
        return out.index_add_(0, index[order], src[order])
    return out.index_add_(0, index, src)


def _combine_shape(src: torch.Tensor, index: torch.Tensor, rows: int, unordered: bool) -> torch.Tensor:
    """What the op returns, without computing it: torch.compile traces the op
    with tensors that hold no data (--compile), and inductor calls the op itself."""
    return src.new_empty((rows,) + tuple(src.shape[1:]))


_LIB.impl("combine", _combine, "CPU")
_LIB.impl("combine", _combine, "CUDA")
_LIB.impl("combine", _combine_shape, "Meta")


class Combine(torch.autograd.Function):
    @staticmethod
    def forward(ctx, src, index, rows, unordered):
        ctx.save_for_backward(index)
        return torch.ops.dtrace_example.combine(src, index, rows, unordered)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        return grad.index_select(0, index), None, None, None


class Dispatch(torch.autograd.Function):
    """tokens[index] for the experts; its backward adds every gathered row's
    gradient back to its token through the combine op (unordered: in a random
    order, as a GPU's scatter-add with atomics does)."""

    @staticmethod
    def forward(ctx, tokens, index, unordered):
        ctx.save_for_backward(index)
        ctx.rows, ctx.unordered = tokens.shape[0], unordered
        return tokens.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        (index,) = ctx.saved_tensors
        return torch.ops.dtrace_example.combine(grad.contiguous(), index, ctx.rows, ctx.unordered), None, None


class EmbeddingLookup(torch.autograd.Function):
    """weight[idx]; its backward adds every token's gradient row to its row of the
    weight gradient through the combine op, in a random order (as a GPU's
    embedding backward does with atomics). The input needs no gradient: only the
    parameter's gradient is not exact."""

    @staticmethod
    def forward(ctx, idx, weight):
        ctx.save_for_backward(idx)
        ctx.rows = weight.shape[0]
        return weight.index_select(0, idx.reshape(-1)).view(*idx.shape, weight.shape[1])

    @staticmethod
    def backward(ctx, grad):
        (idx,) = ctx.saved_tensors
        rows = grad.reshape(-1, grad.shape[-1]).contiguous()
        return None, torch.ops.dtrace_example.combine(rows, idx.reshape(-1), ctx.rows, True)


class Projection(torch.autograd.Function):
    """x @ weight.T (no bias); the input's gradient is exact, the weight's adds
    every token's outer product grad[t] x[t] with the combine op in a random order."""

    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return x.matmul(weight.t())

    @staticmethod
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        g, xs = grad.reshape(-1, grad.shape[-1]), x.reshape(-1, x.shape[-1])
        terms = (g.unsqueeze(2) * xs.unsqueeze(1)).reshape(-1, xs.shape[1])
        index = torch.arange(g.shape[1], device=g.device).repeat(g.shape[0])
        return grad.matmul(weight), torch.ops.dtrace_example.combine(terms, index, g.shape[1], True)


def planted_ops(nondet, layers: int, compiled=(), prefix: str = ""):
    """Where each planted nondeterministic op runs, as dtrace_torch records it:
    [{"plant", "scope", "op"}] in the order a step runs them (the forward's
    blocks in order, then the backward's: the head, the blocks from the last,
    the embedding). `compiled`: the block numbers wrapped in torch.compile (one
    region, scope fwd/blocks.<i>: its forward's op in the region's graph run
    eagerly, fwd/blocks.<i>/eager, where the kernel level records it; an eager
    node of its backward in bwd/blocks.<i>); `prefix`: the model's own in the scopes
    ("module." under DistributedDataParallel). The switches planting no op
    (a resume's generator or data order) are not listed, nor inductor-order,
    whose op is a kernel inductor generates and names itself
    (tests/e2e/torch_compile_inductor.sh finds it in the output code)."""
    combine = "dtrace_example.combine.default"
    atomics = {"index-add": "aten.index_add_.default", "scatter-add": "aten.scatter_add_.default"}
    # The MoE's forward adds its experts' outputs back one way (MoE.forward):
    # through the dispatch (ordered) with dispatch-bwd, else scatter-add's or
    # index-add's atomics, else the combine op.
    forward = next((s for s in ("dispatch-bwd", "scatter-add", "index-add", "combine") if s in nondet), None)
    out = []
    for i in range(layers):
        block = f"{prefix}blocks.{i}"
        if forward in atomics or forward == "combine":
            out.append({"plant": forward, "scope": f"fwd/{block}/eager" if i in compiled else f"fwd/{block}.moe",
                        "op": atomics.get(forward, combine)})
    if "head-bwd" in nondet:
        out.append({"plant": "head-bwd", "scope": f"bwd/{prefix}head", "op": combine})
    for i in reversed(range(layers)):
        if "dispatch-bwd" in nondet:
            block = f"{prefix}blocks.{i}"
            out.append({"plant": "dispatch-bwd", "scope": f"bwd/{block}" if i in compiled else f"bwd/{block}.moe",
                        "op": combine})
    if "embed-bwd" in nondet:
        out.append({"plant": "embed-bwd", "scope": f"bwd/{prefix}embed", "op": combine})
    return out


def print_planted(nondet, layers: int, compiled=(), prefix: str = "") -> None:
    """--print-planted: planted_ops as JSON lines on stdout."""
    import json
    for plant in planted_ops(nondet, layers, compiled, prefix):
        print(json.dumps(plant))


# ---- the model ---------------------------------------------------------------
class TokenEmbedding(nn.Embedding):
    """nn.Embedding (the same parameter and initialization) whose weight gradient
    is accumulated in a random order (--nondet embed-bwd)."""

    def forward(self, idx):
        return EmbeddingLookup.apply(idx, self.weight)


class Head(nn.Linear):
    """nn.Linear without bias whose weight gradient is accumulated in a random
    order (--nondet head-bwd)."""

    def forward(self, x):
        return Projection.apply(x, self.weight)


class Attention(nn.Module):
    def __init__(self, d: int, heads: int, dropout: float):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).tril()
        att = self.drop(att.masked_fill(~mask, float("-inf")).softmax(dim=-1))
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, d))


class Expert(nn.Module):
    def __init__(self, d: int):
        super().__init__()
        self.up = nn.Linear(d, 2 * d)
        self.down = nn.Linear(2 * d, d)

    def forward(self, x):
        return self.down(F.gelu(self.up(x)))


class MoE(nn.Module):
    """Top-k routing over `experts` experts plus one shared expert; every token's
    k+1 contributions are added back by the combine op."""

    def __init__(self, d: int, experts: int, top_k: int, unordered: bool, atomics,
                 dispatch_unordered: bool = False):
        super().__init__()
        self.dispatch_unordered = dispatch_unordered
        self.router = nn.Linear(d, experts, bias=False)
        self.experts = nn.ModuleList(Expert(d) for _ in range(experts))
        self.shared = Expert(d)
        self.top_k, self.unordered, self.atomics = top_k, unordered, atomics

    def forward(self, x):
        b, t, d = x.shape
        tokens = x.reshape(-1, d)
        n = tokens.shape[0]
        weight, chosen = self.router(tokens).softmax(dim=-1).topk(self.top_k, dim=-1)
        if self.dispatch_unordered:
            return self._dispatched(tokens, weight, chosen).view(b, t, d)
        contributions, rows = [self.shared(tokens)], [torch.arange(n, device=x.device)]
        for e, expert in enumerate(self.experts):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            if token.numel():
                contributions.append(expert(tokens[token]) * weight[token, slot].unsqueeze(1))
                rows.append(token)
        src, index = torch.cat(contributions), torch.cat(rows)
        if self.atomics == "scatter-add":  # CUDA, deterministic algorithms off: atomics
            out = torch.zeros_like(tokens).scatter_add_(0, index.unsqueeze(1).expand_as(src), src)
        elif self.atomics:  # CUDA, deterministic algorithms off: index_add_ uses atomics
            out = torch.zeros_like(tokens).index_add_(0, index, src)
        else:
            out = Combine.apply(src, index, n, self.unordered)
        return out.view(b, t, d)


    def _dispatched(self, tokens, weight, chosen):
        """The same layer with every token's rows (shared expert, then its top-k
        experts) gathered by one Dispatch: each token's gradient is the sum of
        top_k + 1 rows, added in a random order in the backward."""
        n = tokens.shape[0]
        routes = []
        for e in range(len(self.experts)):
            token, slot = (chosen == e).nonzero(as_tuple=True)
            if token.numel():
                routes.append((e, token, slot))
        index = torch.cat([torch.arange(n, device=tokens.device)] + [token for _, token, _ in routes])
        parts = Dispatch.apply(tokens, index, True).split([n] + [token.numel() for _, token, _ in routes])
        contributions = [self.shared(parts[0])]
        for (e, token, slot), part in zip(routes, parts[1:]):
            contributions.append(self.experts[e](part) * weight[token, slot].unsqueeze(1))
        return Combine.apply(torch.cat(contributions), index, n, False)


class Block(nn.Module):
    def __init__(self, d, heads, experts, top_k, dropout, unordered, atomics, dispatch_unordered=False,
                 rescale=False):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.attn = Attention(d, heads, dropout)
        self.moe = MoE(d, experts, top_k, unordered, atomics, dispatch_unordered)
        self.drop = nn.Dropout(dropout)
        self.rescale = rescale

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.drop(self.moe(self.ln2(x)))
        if self.rescale:  # --nondet inductor-order: one reduction over every element of the batch
            x = x * torch.rsqrt(x.pow(2).mean() + 1e-6)
        return x


class GPT(nn.Module):
    def __init__(self, vocab=256, d=32, heads=2, layers=2, context=32, experts=4, top_k=2, dropout=0.1,
                 unordered=False, atomics=False, dispatch_unordered=False, embed_unordered=False,
                 head_unordered=False, tie_weights=False, rescale=False):
        super().__init__()
        self.embed = (TokenEmbedding if embed_unordered else nn.Embedding)(vocab, d)
        self.position = nn.Embedding(context, d)
        self.blocks = nn.ModuleList(Block(d, heads, experts, top_k, dropout, unordered, atomics,
                                          dispatch_unordered, rescale)
                                    for _ in range(layers))
        self.ln = nn.LayerNorm(d)
        self.head = (Head if head_unordered else nn.Linear)(d, vocab, bias=False)
        if tie_weights:  # one parameter, used twice a step: by the embedding and by the head
            self.head.weight = self.embed.weight

    def forward(self, idx, targets=None, label_smoothing=0.0):
        """The loss; the logits when no targets are given (--compile-model)."""
        t = idx.shape[1]
        x = self.embed(idx) + self.position(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln(x))
        return logits if targets is None else loss_of(logits, targets, label_smoothing)


def loss_of(logits, targets, label_smoothing=0.0):
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.reshape(-1), label_smoothing=label_smoothing)


def step_loss(model, x, y, smoothing: float, logits_out: bool):
    """The step's loss: from the model, or (logits_out: a whole model compiled,
    as torchtitan's is) from the logits it returns, the loss computed outside
    it, so the region's output is the logits and not one rounded scalar."""
    return loss_of(model(x), y, smoothing) if logits_out else model(x, y, smoothing)


# ---- data --------------------------------------------------------------------
class Batches:
    """Random windows of the corpus, in an order fixed by (seed, epoch): its
    state_dict is the data position, checkpointed with the model. With
    reshuffle_on_resume (--nondet data-order) a restore keeps the position but draws
    a new order, as a loader that does not checkpoint its sampler does."""

    def __init__(self, data: torch.Tensor, batch: int, context: int, seed: int, device: str,
                 reshuffle_on_resume: bool = False):
        self.data, self.batch, self.context, self.device = data, batch, context, device
        self.seed, self.epoch, self.position = seed, 0, 0
        self.reshuffle_on_resume = reshuffle_on_resume
        self.windows = (len(data) - 1) // context
        self._order = self._shuffle()

    def _shuffle(self) -> torch.Tensor:
        g = torch.Generator()
        g.manual_seed(self.seed * 1000003 + self.epoch)
        return torch.randperm(self.windows, generator=g)

    def state_dict(self):
        return {"seed": self.seed, "epoch": self.epoch, "position": self.position}

    def load_state_dict(self, state):
        self.seed, self.epoch, self.position = state["seed"], state["epoch"], state["position"]
        if self.reshuffle_on_resume:
            self.seed = int.from_bytes(os.urandom(4), "little")
        self._order = self._shuffle()

    def __iter__(self):
        return self

    def __next__(self):
        if self.position + self.batch > self.windows:
            self.epoch, self.position = self.epoch + 1, 0
            self._order = self._shuffle()
        starts = self._order[self.position:self.position + self.batch] * self.context
        self.position += self.batch
        rows = torch.stack([self.data[s:s + self.context + 1] for s in starts.tolist()])
        return rows[:, :-1].to(self.device), rows[:, 1:].to(self.device)


def flip_bit(text: str) -> tuple:
    """--flip-bit RANK:STEP."""
    rank, sep, step = text.partition(":")
    if not sep or not rank.isdigit() or not step.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not RANK:STEP")
    return int(rank), int(step)


def flip_one_bit(model: torch.nn.Module) -> None:
    """What a silent data corruption does to one replica: bit 20 of the first
    parameter's first element, flipped in place (the step's state record shows it)."""
    with torch.no_grad():
        first = next(model.parameters()).view(-1)[:1]
        first.view(torch.int32).bitwise_xor_(1 << 20)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--run-dir", help="where the run's log goes (must not exist yet; required unless "
                                       "--print-planted)")
    p.add_argument("--checkpoint-dir", help="checkpoints (the state at the start of a step)")
    p.add_argument("--checkpoint-every", type=int, default=0)
    p.add_argument("--resume", type=int, default=None, metavar="STEP",
                   help="resume from the checkpoint of STEP in --checkpoint-dir (the Recorder's resume_at)")
    p.add_argument("--level", default="step", choices=("step", "layer", "kernel"))
    p.add_argument("--nondet", action="append", default=[], choices=SWITCHES)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--width", type=int, default=32)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--nondet-rank", type=int, default=None,
                   help="plant the --nondet switches on this rank only (torchrun jobs)")
    p.add_argument("--no-record", action="store_true", help="train without dtrace_torch (benchmarks)")
    p.add_argument("--flip-bit", type=flip_bit, default=None, metavar="RANK:STEP",
                   help="flip a bit of RANK's parameters before STEP (a planted silent data corruption, "
                        "for dtrace replicas)")
    p.add_argument("--tie-weights", action="store_true",
                   help="the output head uses the token embedding's weight (one parameter, two uses a step)")
    p.add_argument("--unseeded", action="store_true",
                   help="leave Python's random and NumPy's generator as imported (seeded by the operating "
                        "system, different in every process)")
    p.add_argument("--python-random", action="store_true",
                   help="each step draws its label smoothing from Python's random")
    p.add_argument("--ddp", action="store_true",
                   help="torchrun jobs: DistributedDataParallel averages the gradients (the recorder "
                        "then finds the replica groups itself) instead of explicit all_reduce calls")
    p.add_argument("--startup-delay", type=float, default=0.0, metavar="SECONDS",
                   help="sleep this long at start-up, standing in for what a cluster job pays per launch "
                        "(a large checkpoint read, process-group set-up): tools/bench/bisect_sessions.sh")
    p.add_argument("--compile", action="store_true",
                   help="torch.compile each transformer block (torch 2.x; docs/torch.md, torch.compile)")
    p.add_argument("--compile-model", action="store_true",
                   help="torch.compile the whole model (torch 2.x): one region, fwd/GPT, returning the logits "
                        "(the loss computed outside it, as torchtitan does)")
    p.add_argument("--inductor-threads", type=int, default=None, choices=(1, 2),
                   help="--nondet inductor-order: the threads inductor's generated C++ is written for "
                        "(cpp.threads), instead of one picked at random by each process (a run and its replays "
                        "then run the same code)")
    p.add_argument("--print-planted", action="store_true",
                   help="print the scope and op of each planted op (the --nondet switches), in the order a step "
                        "runs them, one JSON line each, and exit")
    args = p.parse_args(argv)
    if args.print_planted and args.compile_model:
        p.error("--print-planted does not list the plants of --compile-model")
    if args.print_planted:
        world = int(os.environ.get("WORLD_SIZE", "1"))
        print_planted(args.nondet, args.layers, range(args.layers) if args.compile else (),
                      "module." if args.ddp and world > 1 else "")
        return 0
    if not args.run_dir:
        p.error("--run-dir is required")
    if (args.compile or args.compile_model) and not hasattr(torch, "compile"):
        p.error(f"--compile needs torch 2.x (torch.compile); this is torch {torch.__version__}")

    if args.startup_delay > 0:
        time.sleep(args.startup_delay)  # in the replay command too (sys.argv): every launch pays it
    torch.set_num_threads(args.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    rank = int(os.environ.get("RANK", "0"))
    if world > 1:  # under torchrun: data parallel over gloo, gradients averaged by all_reduce
        import torch.distributed as dist
        dist.init_process_group("gloo")
    planted = sorted(args.nondet)  # the header's config: the same on every rank
    if args.nondet_rank is not None and args.nondet_rank != rank:
        args.nondet = []
    # Every generator a step could draw from is seeded. The recorder records Python's
    # and NumPy's only for a step that draws from them (--unseeded: never, unless
    # --python-random), since unseeded they differ in every process.
    torch.manual_seed(args.seed)
    if not args.unseeded:
        random.seed(args.seed)
        if "numpy" in sys.modules:
            sys.modules["numpy"].random.seed(args.seed)
    if "index-add" in args.nondet or "scatter-add" in args.nondet:
        torch.use_deterministic_algorithms(False)
    with open(CORPUS, "rb") as f:
        data = torch.tensor(list(f.read()), dtype=torch.int64)
    model = GPT(d=args.width, layers=args.layers, unordered="combine" in args.nondet,
                atomics=("scatter-add" if "scatter-add" in args.nondet else "index-add" in args.nondet),
                dispatch_unordered="dispatch-bwd" in args.nondet, embed_unordered="embed-bwd" in args.nondet,
                head_unordered="head-bwd" in args.nondet, tie_weights=args.tie_weights,
                rescale="inductor-order" in args.nondet).to(args.device)
    if "inductor-order" in args.nondet and (args.compile or args.compile_model):
        from torch._inductor import config as inductor_config
        # Part of inductor's cache key: each choice is compiled once and cached.
        inductor_config.cpp.threads = args.inductor_threads or random.SystemRandom().choice((1, 2))
    if args.compile:  # each block one compiled region, fwd/blocks.<i> (the embeddings and head stay eager)
        for i, block in enumerate(model.blocks):
            model.blocks[i] = torch.compile(block)
    if args.compile_model:  # the whole model one region, named fwd/GPT by the recorder
        model = torch.compile(model)
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    batches = Batches(data, args.batch, 32, args.seed + rank, args.device, "data-order" in args.nondet)

    if args.no_record:
        for _ in range(args.steps):
            x, y = next(batches)
            loss = step_loss(model, x, y, 0.0, args.compile_model)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        return 0

    import dtrace_torch as dt
    # Every rank a replica of the others: a DDP model tells the recorder so
    # itself; with explicit all_reduce calls the program says it.
    replicas = None if args.ddp or world < 2 else [list(range(world))]
    if args.ddp and world > 1:
        model = torch.nn.parallel.DistributedDataParallel(model, find_unused_parameters=True)
    # data-unsaved: the sampler is not handed to the recorder, as a script that forgets it.
    state = {} if "data-unsaved" in args.nondet else {"data": batches}
    rec = dt.Recorder(model, optimizer, run_dir=args.run_dir, checkpoint_dir=args.checkpoint_dir,
                      checkpoint_every=args.checkpoint_every, state=state, level=args.level,
                      replicas=replicas, resume_at=args.resume,
                      config={"example": "gpt_moe", "nondet": planted, "nondet_rank": args.nondet_rank,
                              "layers": args.layers, "ddp": args.ddp, "tie_weights": args.tie_weights,
                              "flip_bit": "%d:%d" % args.flip_bit if args.flip_bit else None,
                              "python_random": args.python_random,
                              "width": args.width, "device": args.device, "compile": args.compile,
                              "compile_model": args.compile_model, "inductor_threads": args.inductor_threads})
    for step in rec.steps(args.steps):
        if step == rec.restored_at and "dropout-rng" in args.nondet:
            torch.manual_seed(int.from_bytes(os.urandom(4), "little"))  # planted: RNG not restored
        if step == rec.restored_at and "python-rng" in args.nondet:
            random.seed(os.urandom(8))  # planted: Python's random not restored
        x, y = next(batches)
        if args.flip_bit == (rank, step):
            flip_one_bit(model)
        with rec.step(step, batch=(x, y)):
            smoothing = random.uniform(0.0, 0.1) if args.python_random else 0.0
            loss = step_loss(model, x, y, smoothing, args.compile_model)
            loss.backward()
            if world > 1 and not args.ddp:
                for p in model.parameters():
                    torch.distributed.all_reduce(p.grad)
                    p.grad /= world
            grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            optimizer.step()
            optimizer.zero_grad()
            rec.metric("loss", loss)
            rec.metric("grad_norm", grad_norm)
        print(f"step {step} loss {loss.item():.4f}", file=sys.stderr)
    if world > 1:
        # Not left to the interpreter's teardown, where gloo's threads can
        # abort the process ("terminate called without an active exception").
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
