#!/usr/bin/env python3
"""What the dtrace package's recorder costs a training step (issue 41, part 3):
a NumPy loop (numpytrain's shape: layers in scopes, layer-level and
kernel-level records in each, a metric, the parameters as the state) and the
example GPT-MoE through dtrace_torch (tools/torch/gpt_moe.py, the plain loop of
torch_recording.py), each at step and layer level, against the same loop
without recording, measured in the same process.

Each measurement runs in a fresh worker process (this script with --worker) for
one package: "after", the packages of the checkout this script stands in (its
python/ directory: dtrace and dtrace_torch), and, with --baseline-pythonpath,
"before", another checkout's python/ directory with the libdtrace
--baseline-library names. Workers run after, before, after, before, ...
(--rounds of each), so that a drifting machine load weighs on both alike.

In a worker, blocks of plain and recorded steps alternate (plain, recorded,
recorded, plain, ...); a step's time is the process's CPU time
(time.process_time: one BLAS and one torch thread, so what recording costs,
which a machine shared with other jobs blurs less than wall time) and its wall
time. Per workload and level it reports the median plain and recorded step, the
overhead (recorded - plain) in ms and in percent of the plain step, and what
hashing the step's recorded bytes costs by itself (dtrace_fingerprint_host of
each state and batch array, the records step level writes, each time right
after a plain step, timed in the same worker): what the issue asks step level to cost, plus a few microseconds. The
figures printed are the medians over the rounds of each arm.

    /usr/bin/python3 tools/bench/python_recording.py [--build build-release]
        [--baseline-pythonpath BASE/python --baseline-library BASE/build-release/src/capi/libdtrace.so]
        [--rounds 2] [--workloads numpy-1ms,numpy-20ms,torch] [--levels step,layer]

BUILD (a release build, as every figure of tools/bench) gives the libdtrace
both arms load, unless --library or --baseline-library name others. Goal
(issue 41): step level under 10% of a 1 ms CPU step and under 1% of a 20 ms
one; layer level reported. Results go to tools/bench/RESULTS.md by hand."""
from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))

# The NumPy loop's sizes: (batch, width, layers), chosen so that a plain step
# takes about 1 ms and about 20 ms of one core (numpy 1.24, OpenBLAS, one thread);
# numpy-tiny (about 0.1 ms), the same records of a few bytes each: what the
# recorder costs a step besides hashing, with the caches barely disturbed.
NUMPY_SIZES = {"numpy-1ms": (64, 64, 4), "numpy-20ms": (64, 256, 4), "numpy-tiny": (8, 8, 4)}
# The torch example small enough for a step of tens of ms on one thread.
TORCH_OPTIONS = ["--width", "32", "--layers", "2", "--batch", "4"]


# ---- the worker: one package, every workload and level ----------------------------

def numpy_workload(size):
    """(make_state, step(rec, step)) of an MLP of `layers` tanh layers, MSE loss,
    SGD, numpytrain's recording: each layer in scopes fwd|bwd / layer.i, its
    layer-level in and out records around its kernels, each kernel's in and out
    records (its outputs recorded right after it ran, as pins ask), the loss as
    a metric, the parameters as the state."""
    import numpy as np
    batch, width, layers = size
    f32 = np.float32
    init = np.random.default_rng(1)
    params = {}
    for i in range(layers):
        params[f"w{i}"] = (init.standard_normal((width, width)) * (1 / width ** 0.5)).astype(f32)
        params[f"b{i}"] = np.zeros(width, f32)

    def data(step):
        rng = np.random.default_rng([7, step])
        x = rng.uniform(-1, 1, (batch, width)).astype(f32)
        return x, np.sin(x).astype(f32)

    def kernel(rec, op, ins, compute):
        if rec is None:
            return compute()
        rec.record(op, ins, io="in", level="kernel")
        y = compute()
        return rec.record(op, {"y": y}, io="out", level="kernel")["y"]

    def step(rec, number):
        x, target = data(number)
        ctx = rec.step(number, batch={"x": x, "target": target}) if rec is not None else None
        if ctx is not None:
            ctx.__enter__()
        acts = [x]
        for i in range(layers):
            w, b, h = params[f"w{i}"], params[f"b{i}"], acts[-1]
            if rec is None:
                acts.append(np.tanh(h @ w + b))
                continue
            with rec.scope("fwd"), rec.scope(f"layer.{i}"):
                rec.record(f"layer.{i}", {"x": h, "w": w, "b": b}, io="in", level="layer")
                a = kernel(rec, "gemm", {"x": h, "w": w}, lambda: h @ w)
                y = kernel(rec, "bias_tanh", {"a": a, "b": b}, lambda: np.tanh(a + b))
                rec.record(f"layer.{i}", {"y": y}, io="out", level="layer")
            acts.append(y)
        diff = acts[-1] - target
        loss = np.mean(diff * diff, dtype=f32)
        g = (diff * f32(2.0 / diff.size)).astype(f32)
        for i in reversed(range(layers)):
            w, h, y = params[f"w{i}"], acts[i], acts[i + 1]
            if rec is None:
                da = g * (1 - y * y)
                dw, db, g = h.T @ da, da.sum(axis=0), da @ w.T
            else:
                with rec.scope("bwd"), rec.scope(f"layer.{i}"):
                    rec.record(f"layer.{i}", {"dy": g, "x": h, "y": y, "w": w}, io="in", level="layer")
                    da = kernel(rec, "tanh_grad", {"dy": g, "y": y}, lambda: g * (1 - y * y))
                    dw = kernel(rec, "gemm_dw", {"x": h, "da": da}, lambda: h.T @ da)
                    db = kernel(rec, "bias_grad", {"da": da}, lambda: da.sum(axis=0))
                    g = kernel(rec, "gemm_dx", {"da": da, "w": w}, lambda: da @ w.T)
                    rec.record(f"layer.{i}", {"dx": g, "grad.w": dw, "grad.b": db}, io="out", level="layer")
            params[f"w{i}"] = (w - f32(0.01) * dw).astype(f32)
            params[f"b{i}"] = (params[f"b{i}"] - f32(0.01) * db).astype(f32)
        if rec is not None:
            rec.metric("loss", loss)
            ctx.__exit__(None, None, None)

    def recorder(run_dir, level):
        import dtrace
        return dtrace.Recorder({"param": params}, run_dir=run_dir, level=level)

    def state():
        return list(params.values())

    def hashed():
        x, target = data(0)
        return state() + [x, target]

    hashed.state = state  # the state as the step starts (breakdown's "hashed")
    return recorder, step, hashed


def torch_workload():
    import torch
    import dtrace_torch as dt
    import torch_example
    p = argparse.ArgumentParser()
    torch_example.add_options(p)
    model, optimizer, batches = torch_example.build(p.parse_args(TORCH_OPTIONS))

    def step(rec, number):
        x, y = next(batches)
        ctx = rec.step(number, batch=(x, y)) if rec is not None else None  # as gpt_moe.py records it
        if ctx is not None:
            ctx.__enter__()
        loss = model(x, y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        if rec is not None:
            rec.metric("loss", loss)
            ctx.__exit__(None, None, None)

    def recorder(run_dir, level):
        return dt.Recorder(model, optimizer, run_dir=run_dir, level=level)

    def hashed():
        state = [t.detach() for t in model.state_dict().values()]
        for s in optimizer.state.values():
            state += [v for v in s.values() if torch.is_tensor(v)]
        x, y = next(batches)
        return [t.contiguous().numpy() for t in state + [x, y]]

    for _ in range(2):  # the optimizer's state exists before anything is timed
        step(None, 0)
    return recorder, step, hashed


def hash_seconds(step, hashed, first):
    """CPU seconds libdtrace takes to hash the arrays a step records at step
    level (the state and the batch), one call each, right after a plain step
    (so with the caches as a step leaves them), the median of 21: what
    recording them costs at the least."""
    times = []
    for k in range(21):
        step(None, first + k)
        arrays = hashed()
        c = time.process_time()
        fingerprint_each(arrays)
        times.append(time.process_time() - c)
    return statistics.median(times), sum(a.nbytes for a in arrays)


def fingerprint_each(arrays) -> None:
    """Each array hashed by libdtrace, one dtrace_fingerprint_host call each, as step level hashes them."""
    from dtrace import capi
    for a in arrays:
        capi.fingerprint_host(a.ctypes.data, a.nbytes)


class Stub:
    """A recorder that records nothing: the recorded loop's own recording code
    (its dicts of records, closures, with-blocks) at the cost of calls that
    return at once. Recorded - stub is what the dtrace package adds."""

    def __init__(self):
        self._none = contextlib.nullcontext()

    def step(self, number, batch=None):
        return self._none

    def scope(self, part):
        return self._none

    def record(self, op, values, io="out", level="step"):
        return values

    def metric(self, name, value):
        pass


class Inactive(Stub):
    """The real recorder's scope() and record() with no step open (each returns
    at once, as above the level in force): what a step's body costs it at step
    level, without the step's own records."""

    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def scope(self, part):
        return self.rec.scope(part)

    def record(self, op, values, io="out", level="step"):
        return self.rec.record(op, values, io=io, level=level)


# The differences --breakdown pairs within each round: each variant against
# the plain step, and the recorder against hashing alone (what step level
# costs beyond hashing the bytes it records: the "a few microseconds").
PAIRS = [("stub", "plain"), ("inactive", "plain"), ("hashed", "plain"), ("recorded", "plain"),
         ("recorded", "hashed")]


def paired(times) -> dict:
    """Each pair of PAIRS, "a - b": a's step against b's of the same round (the
    variants ran one after another, so they share the host's speed of that
    moment): the median of the differences and its 95% bootstrap interval,
    [median, low, high] in seconds. Within a worker this resolves tens of
    microseconds at 20 ms a step; between workers the figure moves by more
    (each process lays out its arrays in memory its own way), so several
    workers are the measurement."""
    rng = random.Random(0)
    out = {}
    for a, b in PAIRS:
        d = [x - y for x, y in zip(times[a], times[b])]
        boot = sorted(statistics.median(rng.choices(d, k=len(d))) for _ in range(400))
        out[f"{a} - {b}"] = [statistics.median(d), boot[9], boot[390]]
    return out


class Hashed(Stub):
    """No recorder: the step's state and batch hashed at its start, one
    dtrace_fingerprint_host call per array, as step level hashes them, and
    nothing else: what hashing those bytes costs the step, its effect on the
    step's own work (the caches it leaves) included."""

    def __init__(self, state):
        super().__init__()
        self.state = state

    def step(self, number, batch=None):
        fingerprint_each(self.state() + list((batch or {}).values()))
        return self._none


class Counting:
    """libdtrace as capi.Native calls it, counting the calls by name."""

    def __init__(self, lib):
        self.lib, self.calls = lib, collections.Counter()

    def __getattr__(self, name):
        fn = getattr(self.lib, name)
        calls = self.calls

        def call(*args):
            calls[name] += 1
            return fn(*args)
        return call


def breakdown(args, name, recorder, step, hashed, scratch) -> dict:
    """Where a step-level step's recording time goes, in one worker: steps of
    plain, stub, inactive, hashed and recorded loops interleaved one by one (so that
    each finds the caches as the others leave them), the median of each; the
    thread CPU time of each libdtrace call and of each part of rec.step()
    timed in place (wrapped: the wrappers' own clock reads included); the C
    calls a step makes, by name."""
    rec = recorder(os.path.join(scratch, f"{name}-breakdown"), "step")
    variants = {"plain": None, "stub": Stub(), "inactive": Inactive(rec), "hashed": Hashed(hashed.state),
                "recorded": rec}
    times = {v: [] for v in variants}
    order = list(variants)
    for k in range(args.breakdown):
        for i in range(len(order)):  # each variant after each other one in turn
            v = order[(i + k) % len(order)]
            c = time.thread_time()
            step(variants[v], 10000 + len(order) * k + i)
            times[v].append(time.thread_time() - c)
    parts = collections.defaultdict(list)

    def timed(obj, attr, label):
        fn = getattr(obj, attr)

        def wrapper(*a, **kw):
            c = time.thread_time()
            try:
                return fn(*a, **kw)
            finally:
                parts[label].append(time.thread_time() - c)
        setattr(obj, attr, wrapper)

    native = rec.native
    for attr in ("begin_step", "end_step", "tensor_batch", "scalar", "pins", "wants", "tensor"):
        if hasattr(native, attr):
            timed(native, attr, f"Native.{attr}")
    for attr, label in (("_record_state", "state (incl. C)"), ("_batch", "batch (incl. C)"),
                        ("metric", "metric (incl. C)"), ("_begin_step", "the step's start, all"),
                        ("_end_step", "the step's end, all")):
        timed(rec, attr, label)
    timed(rec._generators, "take", "generators take")
    timed(rec._generators, "drawn", "generators drawn")
    first = 10000 + len(order) * args.breakdown
    n = args.breakdown // 2
    for k in range(n):
        step(None, first + 2 * k)
        step(rec, first + 2 * k + 1)
    counting = Counting(native._lib)
    native._lib = counting
    for k in range(10):
        step(rec, first + 2 * n + k)
    native._lib = counting.lib
    rec.close()
    med = {v: statistics.median(t) for v, t in times.items()}
    return {"workload": name, "breakdown": {v: med[v] for v in variants}, "paired": paired(times),
            "parts": {label: [len(t) / (n + 10), statistics.median(t)] for label, t in parts.items()},
            "calls": {k: v / 10 for k, v in counting.calls.items()}}


def worker(args) -> int:
    scratch = tempfile.mkdtemp(prefix="dtrace-bench-python-")
    for name in args.workloads.split(","):
        if name == "torch":
            recorder, step, hashed = torch_workload()
        else:
            recorder, step, hashed = numpy_workload(NUMPY_SIZES[name])
        for _ in range(3):
            step(None, 0)
        hash_s, hash_bytes = hash_seconds(step, hashed, 0)
        if args.breakdown and name != "torch":
            row = breakdown(args, name, recorder, step, hashed, scratch)
            row.update(hash_cpu=hash_s, hash_bytes=hash_bytes)
            print(json.dumps(row), flush=True)
            continue
        for level in args.levels.split(","):
            cpu = {"plain": [], "recorded": []}
            wall = {"plain": [], "recorded": []}
            tensors, number = 0, 0
            for block in range(args.blocks):
                for arm in (("plain", "recorded") if block % 2 == 0 else ("recorded", "plain")):
                    rec = recorder(os.path.join(scratch, f"{name}-{level}-{block}"), level) \
                        if arm == "recorded" else None
                    for _ in range(args.steps):
                        c, w = time.process_time(), time.perf_counter()
                        step(rec, number)
                        cpu[arm].append(time.process_time() - c)
                        wall[arm].append(time.perf_counter() - w)
                        number += 1
                    if rec is not None:
                        tensors += rec.sink.tensors
                        rec.close()
            plain, recorded = statistics.median(cpu["plain"]), statistics.median(cpu["recorded"])
            print(json.dumps({"workload": name, "level": level, "plain_cpu": plain, "recorded_cpu": recorded,
                              "plain_wall": statistics.median(wall["plain"]),
                              "recorded_wall": statistics.median(wall["recorded"]),
                              "hash_cpu": hash_s, "hash_bytes": hash_bytes,
                              "tensors": tensors / len(cpu["recorded"])}), flush=True)
    return 0


# ---- the driver: workers of each package, alternating --------------------------------

def run_worker(args, pythonpath, library):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([pythonpath, HERE]), DTRACE_LIBRARY=library,
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    for variable in [v for v in env if v.startswith("DTRACE_") and v != "DTRACE_LIBRARY"]:
        del env[variable]  # a run of its own, not a replay's
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", "--workloads", args.workloads,
                          "--levels", args.levels, "--blocks", str(args.blocks), "--steps", str(args.steps),
                          "--breakdown", str(args.breakdown)],
                         env=env, stdout=subprocess.PIPE, check=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.startswith("{")]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--build", default=os.path.join(SOURCE, "build-release"),
                   help="the release build whose libdtrace is loaded (default build-release)")
    p.add_argument("--library", help="libdtrace for 'after' (default BUILD/src/capi/libdtrace.so)")
    p.add_argument("--baseline-pythonpath", help="a checkout's python/ directory, measured as 'before'")
    p.add_argument("--baseline-library", help="libdtrace for 'before' (default: 'after''s)")
    p.add_argument("--rounds", type=int, default=2, help="workers per arm")
    p.add_argument("--workloads", default="numpy-1ms,numpy-20ms,torch")
    p.add_argument("--levels", default="step,layer")
    p.add_argument("--blocks", type=int, default=6, help="alternating blocks per arm in a worker")
    p.add_argument("--steps", type=int, default=20, help="steps per block")
    p.add_argument("--breakdown", type=int, default=0, metavar="N",
                   help="instead: where a NumPy step-level step's recording time goes (N steps of each variant; "
                        "this checkout's package, and the baseline's if named)")
    args = p.parse_args()
    if args.worker:
        return worker(args)
    if args.breakdown:
        return print_breakdown(args)
    library = os.path.abspath(args.library or os.path.join(args.build, "src", "capi", "libdtrace.so"))
    arms = [("after", os.path.join(SOURCE, "python"), library)]
    if args.baseline_pythonpath:
        arms.append(("before", os.path.abspath(args.baseline_pythonpath),
                     os.path.abspath(args.baseline_library) if args.baseline_library else library))
    for arm, path, lib in arms:
        print(f"{arm}: PYTHONPATH={path} DTRACE_LIBRARY={lib}")
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    results = {}
    for r in range(args.rounds):
        for arm, path, lib in arms if r % 2 == 0 else arms[::-1]:
            for row in run_worker(args, path, lib):
                results.setdefault((row["workload"], row["level"]), {}).setdefault(arm, []).append(row)
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    print(f"medians over {args.rounds} worker(s) per arm; CPU time per step; overhead = recorded - plain "
          f"(same worker), in ms and % of plain; hash = libdtrace hashing the state and batch alone")
    print(f"{'workload':11s} {'level':6s} {'arm':7s} {'plain ms':>9s} {'rec ms':>9s} {'over ms':>8s} "
          f"{'over %':>7s} {'wall %':>7s} {'hash ms':>8s} {'tensors':>8s}")
    for (name, level), by_arm in results.items():
        for arm, rows in by_arm.items():
            med = lambda f: statistics.median(f(x) for x in rows)  # noqa: E731
            plain, over = med(lambda x: x["plain_cpu"]), med(lambda x: x["recorded_cpu"] - x["plain_cpu"])
            pct = med(lambda x: 100 * (x["recorded_cpu"] - x["plain_cpu"]) / x["plain_cpu"])
            wpct = med(lambda x: 100 * (x["recorded_wall"] - x["plain_wall"]) / x["plain_wall"])
            print(f"{name:11s} {level:6s} {arm:7s} {plain * 1e3:9.3f} {med(lambda x: x['recorded_cpu']) * 1e3:9.3f} "
                  f"{over * 1e3:8.3f} {pct:7.2f} {wpct:7.2f} {med(lambda x: x['hash_cpu']) * 1e3:8.3f} "
                  f"{med(lambda x: x['tensors']):8.0f}")
    return 0


def print_breakdown(args) -> int:
    """--breakdown: this checkout's package, and the baseline's if named (workers alternating)."""
    library = os.path.abspath(args.library or os.path.join(args.build, "src", "capi", "libdtrace.so"))
    arms = [("after", os.path.join(SOURCE, "python"), library)]
    if args.baseline_pythonpath:
        arms.append(("before", os.path.abspath(args.baseline_pythonpath),
                     os.path.abspath(args.baseline_library) if args.baseline_library else library))
    print(f"load average before: {' '.join(f'{x:.1f}' for x in os.getloadavg())}", flush=True)
    rows = []
    for r in range(args.rounds):
        for arm, path, lib in arms if r % 2 == 0 else arms[::-1]:
            rows += [dict(row, arm=arm) for row in run_worker(args, path, lib)]
    print(f"load average after: {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for name, arm in dict.fromkeys((r["workload"], r["arm"]) for r in rows):
        mine = [r for r in rows if r["workload"] == name and r["arm"] == arm]
        print(f"[{arm}]", end=" ")
        med = lambda f: statistics.median(f(r) for r in mine)  # noqa: E731
        plain = med(lambda r: r["breakdown"]["plain"])
        print(f"{name}, step level, medians over {len(mine)} worker(s), thread CPU us per step "
              f"(steps of each variant interleaved):")
        for v in mine[0]["breakdown"]:  # the variants breakdown() ran, in its order
            t = med(lambda r: r["breakdown"][v])
            print(f"  {v:9s} {t * 1e6:8.1f}  +{(t - plain) * 1e6:6.1f} ({100 * (t - plain) / plain:5.1f}%)")
        print("  paired with the step of the same round, median us (95% interval) per worker; "
              "then the median over workers:")
        for pair in (f"{a} - {b}" for a, b in PAIRS):
            each = [r["paired"][pair] for r in mine]
            over = statistics.median(x[0] for x in each)
            print(f"    {pair:17s}: " + ", ".join(f"{m * 1e6:.0f} ({lo * 1e6:.0f}..{hi * 1e6:.0f})"
                                              for m, lo, hi in each)
                  + f"; median {over * 1e6:.0f} us, {100 * over / plain:.2f}% of plain")
        print(f"  the program's own recording code (stub - plain) "
              f"{med(lambda r: r['breakdown']['stub'] - r['breakdown']['plain']) * 1e6:6.1f}; "
              f"the recorder in the body (inactive - stub) "
              f"{med(lambda r: r['breakdown']['inactive'] - r['breakdown']['stub']) * 1e6:6.1f}; "
              f"the step's own records (recorded - inactive) "
              f"{med(lambda r: r['breakdown']['recorded'] - r['breakdown']['inactive']) * 1e6:6.1f}; "
              f"hashing them alone {med(lambda r: r['hash_cpu']) * 1e6:6.1f} "
              f"({int(med(lambda r: r['hash_bytes']))} bytes)")
        print("  timed in place (per step: calls x median us, wrappers' clock reads included):")
        for label in sorted(mine[0]["parts"], key=lambda k: -mine[0]["parts"][k][0] * mine[0]["parts"][k][1]):
            count = med(lambda r: r["parts"].get(label, [0, 0])[0])
            each = med(lambda r: r["parts"].get(label, [0, 0])[1])
            print(f"    {label:20s} {count:4.1f} x {each * 1e6:6.1f} = {count * each * 1e6:6.1f}")
        print("  libdtrace calls per step: " + ", ".join(f"{k.replace('dtrace_recorder_', '')} {v:g}"
                                                      for k, v in mine[0]["calls"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
