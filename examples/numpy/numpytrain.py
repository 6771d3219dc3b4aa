#!/usr/bin/env python3
"""numpytrain: a NumPy training program recorded with the dtrace package
(docs/python.md), and answering every replay dtrace asks of it: a step, a step
at layer or kernel level, one layer or one kernel alone from a capture, and
replay sessions (one process per side serves all of a bisect's replays).

The model: a two-layer perceptron (tanh) with a mean-squared-error loss and
plain SGD, on batches drawn from (--data-seed, rank, step), so a step's batch
is known from its number. Every kernel runs through one table (LAYERS below)
that names its scope, op, inputs and outputs, so recording and isolation are
generic: the isolate function finds a layer or kernel by its scope and op,
reads its inputs from the capture and runs it again.

--nondet PLANTS (a comma list) plants reordered reductions: each output of the
op sums its terms in an order drawn from a generator keyed by (--chaos-seed,
step, repetition), as atomics would. `fwd-gemm` is fwd/layer.1's gemm,
`bwd-gemm` bwd/layer.0's gemm_dw (the first layer's weight gradient), two
causes in two layers; --planted is `--nondet fwd-gemm`. Two runs with
different seeds diverge at the first, and `dtrace bisect --trust` names that
op; its repetitions differ, so confirm calls it nondeterministic; with it
pinned (DTRACE_PIN, below) the second is named. --print-planted prints the
(scope, op) of every plant, in the order a step runs them, as JSON lines and
exits: the ground truth for tests. DTRACE_DETERMINISTIC=0 turns the plants on
(fwd-gemm when none is named), =1 off. --planted-rank R plants them in rank R
only. The seeds are in the header's config, as every switch that changes what
a run computes should be: two runs with different seeds are two
configurations, which bisect compares as such.

Pinned ops (docs/python.md): every kernel's outputs are recorded right after it
ran and before the next kernel reads them, so a pinned output (a replay's
DTRACE_PIN) takes the pinned bytes before anything uses it; run_kernel uses
what rec.record returns (the same arrays, here, pinned in place).

Several processes: each rank trains its own shard (the ranks do not
communicate); examples/numpy/launch.py starts them with RANK and WORLD_SIZE,
and DTRACE_PYTHON_LAUNCHER names it for the replays:

    L="python3 examples/numpy/launch.py 3"
    DTRACE_PYTHON_LAUNCHER="$L" $L python3 examples/numpy/numpytrain.py --run-dir a ...

--dropout adds a layer, fwd/dropout, that zeroes a quarter of the batch's
inputs where a generator draws below 0.25; it records the generator's state as
its `in` record `rng` (dtrace-fp(5): every tensor a layer reads, its generator
too). `--dropout seeded` is how to keep a generator: its own, seeded from
--dropout-seed and in the Recorder's state under the name "rng" (checkpointed,
restored, recorded at each step's start), so runs agree and resume. Two ways not
to, which two fresh runs show and `dtrace bisect --trust` names as the verdict
generator: `--dropout unseeded`, its own generator seeded by the operating
system and not in the state; `--dropout global`, NumPy's global generator,
which this program never seeds (the dtrace package checkpoints it and records
it at the end of a step that drew from it: `step rng numpy`).

--decline-steps all|R: in a replay session, every step request after the
session's first is declined (dtrace-fp(5), "Replay sessions": dtrace launches
it instead), as by a program that runs its step once per process; by every
rank, or by rank R only, a mix that dtrace refuses. It changes no result.

Usage: numpytrain.py --run-dir DIR [--checkpoint-dir DIR] [--steps N]
         [--checkpoint-every K] [--level step|layer|kernel] [--planted]
         [--nondet fwd-gemm,bwd-gemm] [--print-planted]
         [--planted-rank R] [--chaos-seed S] [--data-seed S] [--no-isolate]
         [--dropout seeded|unseeded|global] [--dropout-seed S]
         [--decline-steps all|R]
Exit 0 done, 2 trouble (a message on stderr)."""
import argparse
import json
import os
import sys

import numpy as np

import dtrace

BATCH, DIN, HID, DOUT = 8, 16, 32, 4
LEARNING_RATE = np.float32(0.05)
f32 = np.float32

# --nondet's plants: the (scope, op) each reorders, in the order a step runs them.
PLANTS = {"fwd-gemm": ("fwd/layer.1", "gemm"), "bwd-gemm": ("bwd/layer.0", "gemm_dw")}


class Model:
    """The parameters, the activations of the step in flight, the chaos."""

    def __init__(self, plants, chaos_seed: int):
        init = np.random.default_rng(42)  # a generator of its own: the global ones stay untouched
        self.params = {"w0": (init.uniform(-1, 1, (DIN, HID)) * 0.5).astype(f32), "b0": np.zeros(HID, f32),
                       "w1": (init.uniform(-1, 1, (HID, DOUT)) * 0.3).astype(f32), "b1": np.zeros(DOUT, f32)}
        self.t = {}  # activations and gradients by name
        self.plants, self.chaos_seed = set(plants), chaos_seed
        self.chaos = None
        self.dropout = None  # a Dropout with --dropout

    def rekey(self, step: int, repetition: int) -> None:
        """The reordering's generator for a step (repetition -1) or one isolated repetition."""
        self.chaos = np.random.default_rng([self.chaos_seed, step, repetition + 1])

    def __getitem__(self, name):
        return self.params[name] if name in self.params else self.t[name]

    def __setitem__(self, name, value):
        self.t[name] = value


class Dropout:
    """The generator fwd/dropout draws from (--dropout): its own, or NumPy's
    global one. Its state is the layer's `in` record `rng`, as u64 words, and
    state_dict/load_state_dict make it the Recorder's state (seeded mode)."""

    KEEP = 0.75

    def __init__(self, mode: str, seed: int):
        self.mode = mode
        self.own = None if mode == "global" else np.random.default_rng(seed if mode == "seeded" else None)

    def random(self, shape):
        return np.random.random(shape) if self.own is None else self.own.random(shape)

    def words(self) -> np.ndarray:
        """The generator's whole state as u64 words: what the next draws depend on."""
        if self.own is None:
            _, keys, pos, has_gauss, gauss = np.random.get_state()
            return np.concatenate([keys.astype(np.uint64), np.array([pos, has_gauss], np.uint64),
                                   np.array([gauss], np.float64).view(np.uint64)])
        s, low = self.own.bit_generator.state, (1 << 64) - 1
        return np.array([s["state"]["state"] & low, s["state"]["state"] >> 64, s["state"]["inc"] & low,
                         s["state"]["inc"] >> 64, s["has_uint32"], s["uinteger"]], np.uint64)

    def load_words(self, w: np.ndarray) -> None:
        """words() read back (isolation: a repetition draws from the captured state)."""
        w = [int(x) for x in w]
        if self.own is None:
            np.random.set_state(("MT19937", np.array(w[:624], np.uint32), w[624], w[625],
                                 float(np.array([w[626]], np.uint64).view(np.float64)[0])))
            return
        self.own.bit_generator.state = {"bit_generator": "PCG64",
                                        "state": {"state": w[0] | (w[1] << 64), "inc": w[2] | (w[3] << 64)},
                                        "has_uint32": w[4], "uinteger": w[5]}

    def state_dict(self):
        return self.own.bit_generator.state

    def load_state_dict(self, d) -> None:
        self.own.bit_generator.state = d


# ---- Kernels: each reads and writes the model's tensors by name. ---------------

def gemm(m, a, w, reorder=False):
    """out[r][c] = sum_k a[r][k] * w[k][c], k in index order, or (reorder) in an
    order shuffled per output: float addition is not associative."""
    terms = a[:, :, None] * w[None, :, :]              # (rows, inner, cols)
    terms = np.ascontiguousarray(terms.transpose(0, 2, 1))  # (rows, cols, inner)
    if reorder:
        order = np.argsort(m.chaos.random(terms.shape), axis=-1)
        terms = np.take_along_axis(terms, order, axis=-1)
    return np.cumsum(terms, axis=-1, dtype=f32)[..., -1]  # a sequential sum, left to right


def k_dropout(m):
    keep = m.dropout.random(m["x"].shape) >= 1 - Dropout.KEEP
    m["x"] = (m["x"] * keep / f32(Dropout.KEEP)).astype(f32)


def k_gemm0(m): m["a0"] = gemm(m, m["x"], m["w0"])
def k_bias_tanh(m): m["h0"] = np.tanh(m["a0"] + m["b0"]).astype(f32)
def k_gemm1(m): m["a1"] = gemm(m, m["h0"], m["w1"], reorder="fwd-gemm" in m.plants)
def k_bias1(m): m["y"] = (m["a1"] + m["b1"]).astype(f32)


def k_mse(m):
    diff = m["y"] - m["target"]
    m["loss"] = np.asarray(np.mean(diff * diff), dtype=f32)
    m["dy"] = (diff * f32(2.0 / diff.size)).astype(f32)


def k_dw1(m): m["grad.w1"] = gemm(m, m["h0"].T.copy(), m["dy"])
def k_db1(m): m["grad.b1"] = m["dy"].sum(axis=0, dtype=f32)
def k_dh0(m): m["dh0"] = gemm(m, m["dy"], m["w1"].T.copy())
def k_tanh_grad(m): m["da0"] = (m["dh0"] * (f32(1) - m["h0"] * m["h0"])).astype(f32)
def k_dw0(m): m["grad.w0"] = gemm(m, m["x"].T.copy(), m["da0"], reorder="bwd-gemm" in m.plants)
def k_db0(m): m["grad.b0"] = m["da0"].sum(axis=0, dtype=f32)


# (scope, layer inputs, layer outputs, [(op, kernel, inputs, outputs)]). A
# layer's in records are everything it reads (parameters included), so it can
# be re-run from its capture alone (dtrace-fp(5), "What isolation needs"); a
# backward's outputs include its parameter gradients (its own records).
LAYERS = [
    ("fwd/layer.0", ["x", "w0", "b0"], ["h0"],
     [("gemm", k_gemm0, ["x", "w0"], ["a0"]), ("bias_tanh", k_bias_tanh, ["a0", "b0"], ["h0"])]),
    ("fwd/layer.1", ["h0", "w1", "b1"], ["y"],
     [("gemm", k_gemm1, ["h0", "w1"], ["a1"]), ("bias", k_bias1, ["a1", "b1"], ["y"])]),
    ("fwd/loss", ["y", "target"], ["loss", "dy"], [("mse", k_mse, ["y", "target"], ["loss", "dy"])]),
    ("bwd/layer.1", ["dy", "h0", "w1"], ["dh0", "grad.w1", "grad.b1"],
     [("gemm_dw", k_dw1, ["h0", "dy"], ["grad.w1"]), ("bias_grad", k_db1, ["dy"], ["grad.b1"]),
      ("gemm_dx", k_dh0, ["dy", "w1"], ["dh0"])]),
    ("bwd/layer.0", ["dh0", "h0", "x"], ["grad.w0", "grad.b0"],
     [("tanh_grad", k_tanh_grad, ["dh0", "h0"], ["da0"]), ("gemm_dw", k_dw0, ["x", "da0"], ["grad.w0"]),
      ("bias_grad", k_db0, ["da0"], ["grad.b0"])]),
]


# --dropout: the layer before layer.0, its output the x that layer.0 reads.
DROPOUT = ("fwd/dropout", ["x", "rng"], ["x"], [("dropout", k_dropout, ["x", "rng"], ["x"])])


def run_kernel(rec, m, op, kernel, ins, outs):
    rec.record(op, {n: m[n] for n in ins}, io="in", level="kernel")
    kernel(m)
    # Right after the kernel, before anything reads its outputs: a pinned one
    # is what the rest of the step uses (docs/python.md, "Pinned ops").
    m.t.update(rec.record(op, {n: m[n] for n in outs}, io="out", level="kernel"))


def run_layer(rec, m, layer, only_op=None):
    """One layer inside its scopes (fwd, layer.1): its layer-level in and out
    records around its kernels; with only_op, that kernel alone."""
    scope, ins, outs, kernels = layer
    group, part = scope.split("/")
    with rec.scope(group), rec.scope(part):
        if only_op is not None:
            run_kernel(rec, m, *next(k for k in kernels if k[0] == only_op))
            return
        rec.record(part, {n: m[n] for n in ins}, io="in", level="layer")
        for k in kernels:
            run_kernel(rec, m, *k)
        rec.record(part, {n: m[n] for n in outs}, io="out", level="layer")


def batch(data_seed: int, rank: int, step: int):
    rng = np.random.default_rng([data_seed, rank, step])
    x = rng.uniform(-1, 1, (BATCH, DIN)).astype(f32)
    return x, np.sin(x[:, :DOUT] + x[:, 4:4 + DOUT]).astype(f32)


def layers(m):
    return ([DROPOUT] if m.dropout is not None else []) + LAYERS


def train_step(rec, m, step, x, target):
    m.rekey(step, -1)
    m.t = {"x": x, "target": target}
    if m.dropout is not None:
        m["rng"] = m.dropout.words()
    for layer in layers(m):
        run_layer(rec, m, layer)
    rec.metric("loss", m["loss"])
    for name in m.params:  # SGD, at step scope: the next step's state records show it
        m.params[name] = (m.params[name] - LEARNING_RATE * m["grad." + name]).astype(f32)


def isolate(m):
    """DTRACE_ISOLATE: one layer or one kernel from the captured inputs, as the
    recorder asks (dtrace.Isolation)."""
    def go(iso: dtrace.Isolation) -> None:
        layer = next((l for l in layers(m) if l[0] == iso.scope), None)
        if layer is None:
            raise dtrace.CaptureError(f"DTRACE_ISOLATE={iso.scope}: no such layer in this model")
        kernel = next((k for k in layer[3] if k[0] == iso.op), None) if iso.op else None
        if iso.op and kernel is None:
            raise dtrace.CaptureError(f"DTRACE_ISOLATE={iso.scope}::{iso.op}: no such kernel in {iso.scope}")
        for k in iso.repetitions():
            m.t = {}
            for name in kernel[2] if kernel else layer[1]:  # every repetition from the captured inputs
                record = iso.find(name)
                value = iso.read_into(np.empty(record.shape, np.uint64 if name == "rng" else f32), name)
                if name == "rng":
                    m.dropout.load_words(value)
                    m[name] = value
                elif name in m.params:
                    m.params[name] = value
                else:
                    m[name] = value
            m.rekey(iso.step, k)  # each repetition with its own chaos
            run_layer(iso.recorder, m, layer, only_op=iso.op)
    return go


def decline_later_steps() -> None:
    """--decline-steps: each step request of a replay session after its first
    is declined (dtrace.capi.Session.decline) before the Recorder serves it;
    the first and the isolations are served. The Recorder reads requests with
    Session.next(), so this wraps it: the request's variables are read from
    its file, as dtrace wrote it (dtrace-fp(5))."""
    from dtrace import capi
    read, serve = [0], capi.Session.next

    def next_request(session) -> bool:
        while serve(session):
            number, read[0] = read[0], read[0] + 1
            with open(os.path.join(os.environ["DTRACE_SESSION"], f"request.{number}.json")) as f:
                env = json.load(f)["env"]
            if "DTRACE_ISOLATE" in env or session.first_step_request():
                return True
            session.decline(f"numpytrain --decline-steps: step {session.step()} runs once per process")
        return False

    capi.Session.next = next_request


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir")
    p.add_argument("--checkpoint-dir")
    p.add_argument("--steps", type=int, default=4)
    p.add_argument("--checkpoint-every", type=int, default=1)
    p.add_argument("--level", choices=["step", "layer", "kernel"], default="step")
    p.add_argument("--planted", action="store_true", help="--nondet fwd-gemm")
    p.add_argument("--nondet", default="", metavar="PLANTS",
                   help="a comma list of planted reorderings: " + ", ".join(PLANTS))
    p.add_argument("--print-planted", action="store_true",
                   help="print each plant's scope and op as a JSON line, in the order a step runs them, and exit")
    p.add_argument("--planted-rank", type=int)
    p.add_argument("--chaos-seed", type=int, default=0)
    p.add_argument("--data-seed", type=int, default=7)
    p.add_argument("--no-isolate", action="store_true",
                   help="pass no isolate=: a program that cannot re-run a layer alone, as bisect sees it")
    p.add_argument("--dropout", choices=["seeded", "unseeded", "global"],
                   help="a dropout layer on the inputs, its generator seeded and in the state, its own and "
                        "unseeded, or NumPy's global one, unseeded")
    p.add_argument("--dropout-seed", type=int, default=11)
    p.add_argument("--decline-steps", metavar="all|R",
                   help="in a replay session, decline every step request after the first (every rank, or rank R)")
    args = p.parse_args()
    if args.steps < 0 or args.checkpoint_every < 0:
        p.error("--steps and --checkpoint-every take numbers >= 0")
    named = [n for n in args.nondet.split(",") if n] + (["fwd-gemm"] if args.planted else [])
    unknown = [n for n in named if n not in PLANTS]
    if unknown:
        p.error(f"--nondet {unknown[0]}: not a plant (one of {', '.join(PLANTS)})")
    named = [n for n in PLANTS if n in named]  # in step order, once each
    if args.print_planted:
        for n in named:
            print(json.dumps({"plant": n, "scope": PLANTS[n][0], "op": PLANTS[n][1]}))
        return 0
    if not args.run_dir:
        p.error("--run-dir is required")

    m = Model(plants=(), chaos_seed=args.chaos_seed)
    m.dropout = Dropout(args.dropout, args.dropout_seed) if args.dropout else None
    state = {"param": m.params}
    if args.dropout == "seeded":
        state["rng"] = m.dropout  # op "rng": bisect knows a generator's state by it (dtrace-fp(5))
    rec = dtrace.Recorder(state, run_dir=args.run_dir, checkpoint_dir=args.checkpoint_dir,
                          checkpoint_every=args.checkpoint_every, level=args.level,
                          config={"model": "mlp", "din": DIN, "hid": HID, "dout": DOUT, "batch": BATCH,
                                  "planted": bool(named), "nondet": ",".join(named),
                                  "planted_rank": args.planted_rank,
                                  "chaos_seed": args.chaos_seed, "data_seed": args.data_seed,
                                  **({"dropout": args.dropout, "dropout_seed": args.dropout_seed}
                                     if args.dropout else {})},
                          isolate=None if args.no_isolate else isolate(m))
    if args.decline_steps in ("all", str(rec.rank)):
        decline_later_steps()
    planted = named if args.planted_rank in (None, rec.rank) else []
    if rec.deterministic is not None:  # DTRACE_DETERMINISTIC: =0 plants (fwd-gemm if none is named), =1 none
        planted = [] if rec.deterministic else (named or ["fwd-gemm"])
    m.plants = set(planted)
    for step in rec.steps(args.steps):
        x, target = batch(args.data_seed, rec.rank, step)
        with rec.step(step, batch={"x": x, "target": target}):
            train_step(rec, m, step, x, target)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except dtrace.Error as e:
        print(f"numpytrain: {e}", file=sys.stderr)
        sys.exit(2)
