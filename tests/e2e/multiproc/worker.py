#!/usr/bin/env python3
"""One rank of a small data-parallel job that speaks dtrace-replay/1.1 by itself.

Started N times by a launcher (launch.sh) with RANK and WORLD_SIZE. Each step
runs two layers of scalar ops on the rank's own input, then an all-reduce of the
layers' outputs through files in MP_SHARED, then a loss. Records are scalars
(f64 bits), so no fingerprint library is needed. The protocol part is the
lines of dtrace-fp(5)'s EXAMPLES, marked below.

  worker.py --steps S --out RUN_DIR [--planted RANK]
--planted R: on rank R the add op of fwd/layer.1 adds a little noise, drawn
afresh every call (a nondeterministic kernel). MP_FAIL_RANK / MP_KILL_RANK /
MP_HANG_RANK: that rank raises / kills itself / hangs when dtrace started it (a replay, or
an arm of dtrace verify or tax); MP_EXIT_RANK: it writes "exit 3 TIME" and exits 3, as
the C++ recorder does; MP_OSEXIT_RANK: it exits 3 writing nothing (os._exit). With
MP_WAIT_WATCHED=1 it does so only once dtrace (MP_DTRACE_PID) watches every rank's
process, so that the failure comes mid-replay, as a real one does, never before
dtrace could see the ranks start.
"""
import argparse, json, math, os, random, struct, sys, time

import rank_watch  # beside this file

# ---- dtrace-replay/1.1, as in dtrace-fp(5) EXAMPLES ----
rank, d = int(os.environ.get("RANK", "0")), os.environ.get("DTRACE_OUT_DIR") or os.environ.get("DTRACE_RUN_DIR")
def status(line):
    if d: open(f"{d}/rank{rank}.status", "w").write(line + "\n")
if d:
    os.makedirs(d, exist_ok=True)
    os.dup2(os.open(f"{d}/rank{rank}.stderr", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 2)
    sys.excepthook = lambda *e: (sys.__excepthook__(*e), status("exit 1"))
status(f"running {os.getpid()}")
# ---- end of the protocol's lines (the rest is this workload's own) ----

world = int(os.environ.get("WORLD_SIZE", "1"))
p = argparse.ArgumentParser()
p.add_argument("--steps", type=int, default=2)
p.add_argument("--out", required=True)
p.add_argument("--planted", type=int, default=-1)
args = p.parse_args()

env = os.environ
replay_step = int(env["DTRACE_REPLAY_STEP"]) if env.get("DTRACE_REPLAY_STEP") else None
isolate = env.get("DTRACE_ISOLATE") or None
level = {"step": 0, "layer": 1, "kernel": 2}[env.get("DTRACE_LEVEL") or "layer"]
scope_prefix = env.get("DTRACE_SCOPE", "")
capture = env.get("DTRACE_CAPTURE") or None
inputs = env.get("DTRACE_INPUTS") or None
repeat = int(env.get("DTRACE_REPEAT") or "1")
run_dir = env.get("DTRACE_RUN_DIR") or args.out

if replay_step is not None or isolate:
    path = f"{d}/rank{rank}.jsonl" if d else env["DTRACE_OUT"]
else:
    os.makedirs(run_dir, exist_ok=True)
    path = f"{run_dir}/rank{rank}.jsonl"
out = open(path, "w")
if capture:
    os.makedirs(capture, exist_ok=True)
argv = [os.path.abspath(sys.argv[0])] + sys.argv[1:]
launcher = [os.path.join(os.path.dirname(argv[0]), "launch.sh"), str(world), sys.executable]
header = {"dtrace": "fp/1", "run": os.path.basename(args.out), "world_size": world,
          "hash": "xxh3-64k/1", "level": ["step", "layer", "kernel"][level], "env": {},
          "replay": {"argv": launcher + argv, "protocol": "dtrace-replay/1.1"},
          "config": {"planted": args.planted}}
out.write(json.dumps(header) + "\n")
captured = []  # this step's capture index lines

class Step:
    def __init__(self, step):
        self.step, self.seq = step, 0
    def record(self, lvl, scope, op, io, name, value):
        if lvl > level or (lvl == 2 and not scope.startswith(scope_prefix)):
            return
        bits = struct.unpack("<Q", struct.pack("<d", value))[0]
        r = {"step": self.step, "rank": rank, "seq": self.seq, "scope": scope, "op": op, "io": io,
             "name": name, "dtype": "f64", "bits": f"{bits:016x}", "value": value}
        out.write(json.dumps(r) + "\n")
        if capture and scope.startswith(scope_prefix):
            f = f"r{rank}-s{self.step}-q{self.seq}.bin"
            open(f"{capture}/{f}", "wb").write(struct.pack("<d", value))
            captured.append(dict(r, file=f))
        self.seq += 1
        status(f"running {os.getpid()} {self.step} {self.seq}")
    def end(self):
        out.write(json.dumps({"step": self.step, "rank": rank, "end": True, "count": self.seq}) + "\n")
        out.flush()
        if capture:
            with open(f"{capture}/capture.rank{rank}.jsonl", "a") as index:
                if index.tell() == 0:
                    index.write(json.dumps(header) + "\n")
                for line in captured:
                    index.write(json.dumps(line) + "\n")
                index.write(json.dumps({"step": self.step, "rank": rank, "end": True,
                                        "count": len(captured)}) + "\n")
            captured.clear()

W, B = [1.5, 0.75], [0.25, -0.5]

def op(s, layer, name, x):
    scope = f"fwd/layer.{layer}"
    s.record(2, scope, name, "in", "x", x)
    if name == "mul":
        y = x * W[layer]
    elif name == "add":
        y = x + B[layer]
        if layer == 1 and rank == args.planted:
            y += random.random() * 1e-9
    else:
        y = math.tanh(x)
    s.record(2, scope, name, "out", "y", y)
    return y

def layer(s, index, x):
    scope = f"fwd/layer.{index}"
    s.record(1, scope, "block", "in", "x", x)
    for name in ("mul", "add", "tanh"):
        x = op(s, index, name, x)
    s.record(1, scope, "block", "out", "y", x)
    return x

def allreduce(step, value):
    shared = env["MP_SHARED"]
    mine = f"{shared}/s{step}.r{rank}"
    open(mine + ".tmp", "w").write(repr(value))
    os.rename(mine + ".tmp", mine)
    total = 0.0
    for r in range(world):
        while not os.path.exists(f"{shared}/s{step}.r{r}"):
            time.sleep(0.01)
        total += float(open(f"{shared}/s{step}.r{r}").read())
    return total

def planted_end(step):
    """The failure MP_*_RANK asks of this rank, if any."""
    modes = ("MP_FAIL_RANK", "MP_KILL_RANK", "MP_HANG_RANK", "MP_EXIT_RANK", "MP_OSEXIT_RANK")
    mode = next((m for m in modes if env.get(m) == str(rank)), None)
    if mode is None:
        return
    if env.get("MP_WAIT_WATCHED") == "1":
        rank_watch.wait_until_watched(env["MP_DTRACE_PID"], d, world)
    if mode == "MP_FAIL_RANK":
        print(f"rank {rank}: planted failure before step {step}", file=sys.stderr)
        raise RuntimeError(f"planted failure on rank {rank}")
    if mode == "MP_KILL_RANK":
        os.kill(os.getpid(), 9)
    if mode == "MP_HANG_RANK":
        time.sleep(1000)
    print(f"rank {rank}: planted exit 3 before step {step}", file=sys.stderr, flush=True)
    if mode == "MP_EXIT_RANK":
        status(f"exit 3 {time.time_ns()}")
    os._exit(3)

def run_step(step):
    start = time.monotonic()
    s = Step(step)
    for i, (w, b) in enumerate(zip(W, B)):
        s.record(0, "step", "params", "state", f"w{i}", w)
        s.record(0, "step", "params", "state", f"b{i}", b)
    under_dtrace = replay_step is not None or "DTRACE_RUN_DIR" in env
    if under_dtrace:
        planted_end(step)
    x = 0.1 * (rank + 1) + 0.01 * step  # this rank's batch
    for i in range(2):
        x = layer(s, i, x)
    s.record(1, "comm/allreduce", "allreduce", "in", "x", x)
    total = allreduce(step, x)
    s.record(1, "comm/allreduce", "allreduce", "out", "y", total)
    s.record(0, "step", "loss", "metric", "loss", total * total)
    s.record(0, "step", "time", "timing", "step_seconds", time.monotonic() - start)
    s.end()

def captured_input(scope, op_name):
    """The captured input of (scope, op) for this rank, from DTRACE_INPUTS."""
    for name in sorted(os.listdir(inputs)):
        if not (name.startswith("capture") and name.endswith(".jsonl")):
            continue
        for line in open(f"{inputs}/{name}"):
            r = json.loads(line)
            if r.get("rank") == rank and r.get("scope") == scope and r.get("op") == op_name \
                    and r.get("io") == "in" and "file" in r:
                return struct.unpack("<d", open(f"{inputs}/{r['file']}", "rb").read())[0]
    return None

if isolate:
    scope, _, op_name = isolate.partition("::")
    index = int(scope.rsplit(".", 1)[1])
    x = captured_input(scope, op_name or "block")
    if x is None:
        sys.exit(f"rank {rank}: no captured input for {isolate} in {inputs}")
    for k in range(repeat):
        s = Step(k)
        if op_name:
            op(s, index, op_name, x)
        else:
            layer(s, index, x)
        s.end()
elif replay_step is not None:
    run_step(replay_step)
else:
    for step in range(args.steps):
        run_step(step)
out.close()
status("exit 0")
