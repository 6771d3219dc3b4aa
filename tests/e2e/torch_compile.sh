#!/usr/bin/env bash
# torch.compile (docs/torch.md, torch.compile): gpt_moe.py --compile wraps each
# block in torch.compile, and --nondet combine plants the unordered combine op
# inside that compiled region, where inductor's generated code calls it. A
# compiled region is recorded as one unit: at layer level the scope
# fwd/blocks.<i> and none of the modules inside it; at kernel level one op,
# torch.compile, run compiled (not the eager ATen ops a dispatch mode would make
# dynamo fall back to), forward and backward. Two runs diverge at step 0. A cause in the region's
# backward (--nondet dispatch-bwd) is named in bwd/blocks.0.
# Inside the region, the op: at kernel level the region's graph also runs
# eagerly under the dispatch mode in fwd/blocks.0/eager, so the kernel pass
# names the custom op there (dtrace_example.combine.default, call 0),
# confirmed alone from its captured inputs, and the culprit search, the op
# pinned, ends in agreement (the region's results are then the eager graph's).
#
# torch 1.13 has no torch.compile: there the test checks that --compile is
# refused, saying so, and skips (status 77, under CI too: tools/test.sh's torch
# 2.x pass is the one that runs it, and fails when it cannot).
. "$(dirname "$0")/torch-lib.sh"
needs_compile "--compile needs torch 2.x" "$EXAMPLE" --steps 1 --run-dir r --compile

ex --steps 1 --layers 1 --compile --nondet combine --run-dir a --checkpoint-dir ca --checkpoint-every 1
ex --steps 1 --layers 1 --compile --nondet combine --run-dir b --checkpoint-dir cb --checkpoint-every 1
[ -d "$TORCHINDUCTOR_CACHE_DIR" ] || fail "inductor compiled nothing into $TORCHINDUCTOR_CACHE_DIR"

# What a replay of a compiled model records at layer and kernel level.
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=layer DTRACE_OUT=layer.jsonl ex --steps 1 --layers 1 --compile --run-dir a --checkpoint-dir ca
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=kernel DTRACE_OUT=kernel.jsonl ex --steps 1 --layers 1 --compile --run-dir a --checkpoint-dir ca
"$PYTHON" - <<'PY' || fail "the records of a compiled model"
import json
def records(path):
    return [r for r in map(json.loads, open(path)) if "scope" in r]
layer = records("layer.jsonl")
scopes = {r["scope"] for r in layer}
# The regions are scopes; no module boundary inside them is (they would break dynamo's graph).
for want in ("fwd/blocks.0", "bwd/blocks.0", "fwd/embed", "fwd/head"):
    assert want in scopes, (want, sorted(scopes))
assert not [s for s in scopes if s.startswith(("fwd/blocks.0.", "bwd/blocks.0."))], sorted(scopes)
assert {r["op"] for r in layer if r["scope"] == "fwd/blocks.0"} == {"OptimizedModule"}
kernel = records("kernel.jsonl")
for region in ("fwd/blocks.0", "bwd/blocks.0"):
    ops = [r for r in kernel if r["scope"] == region]
    assert any(r["op"] == "torch.compile" and r["io"] == "out" for r in ops), (region, ops[:3])
# The forward of a region is only its compiled call: no eager stand-in for it.
fwd = {r["op"] for r in kernel if r["scope"] == "fwd/blocks.0"}
assert fwd == {"OptimizedModule", "torch.compile"}, fwd
# Its graph run eagerly, op by op, in a sub-scope: the custom op among them.
eager = [r["op"] for r in kernel if r["scope"] == "fwd/blocks.0/eager"]
assert "dtrace_example.combine.default" in eager and "aten.addmm.default" in eager, sorted(set(eager))
# Its compiled backward nodes ran compiled: inductor's calls of ATen (mm with
# out=) are inside the one op, never recorded as ops of their own.
assert not [r for r in kernel if r["op"].endswith(".out")], "compiled code ran under the dispatch mode"
# The layer records are the same computation as at step level: the region's
# output at kernel level is its output at layer level.
out = lambda recs, op: [r["hash"] for r in recs if r["scope"] == "fwd/blocks.0" and r["op"] == op and r["io"] == "out"]
assert out(kernel, "torch.compile") == out(layer, "OptimizedModule"), "the region computed otherwise at kernel level"
PY

# The whole model compiled: one region, named after the model's class (never
# torch's attribute _orig_mod). Its inputs need no
# gradient, so the end of its backward is its last compiled node: the kernels
# after it (clip_grad_norm's) are not the region's. A module compiled in place
# (Module.compile(), hooks inside the compiled code) is refused.
"$PYTHON" - <<'PY' || fail "a whole model compiled"
import collections, json, torch, dtrace_torch as dt
torch.manual_seed(0)
model = torch.compile(torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.GELU(), torch.nn.Linear(16, 4)))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
rec = dt.Recorder(model, opt, run_dir="whole", level="kernel")
for step in rec.steps(1):
    with rec.step(step):
        model(torch.randn(5, 8)).sum().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
records = [r for r in map(json.loads, open("whole/rank0.jsonl")) if "scope" in r]
ops = collections.defaultdict(set)
for r in records:
    ops[r["scope"]].add(r["op"])
assert ops["fwd/Sequential"] == {"OptimizedModule", "torch.compile"}, dict(ops)
assert "torch.compile" in ops["bwd/Sequential"], dict(ops)
assert {"aten.addmm.default", "aten.gelu.default"} <= ops["fwd/Sequential/eager"], dict(ops)
assert not [s for s in ops if "_orig_mod" in s], dict(ops)
norms = {r["scope"] for r in records if "norm" in r["op"]}
assert norms and "bwd/Sequential" not in norms, norms
inplace = torch.nn.Linear(2, 2)
inplace.compile()
try:
    dt.Recorder(inplace, None, run_dir="inplace", level="layer")
    raise AssertionError("a module compiled in place was recorded")
except dt.DtraceError as e:
    assert "compiled in place" in str(e), e
PY

run_dtrace 1 diff --json a b
json_is first.step 0
run_dtrace 0 bisect --trust --timeout 900 --json a b
json_is verdict '"named"'
json_is layer '"fwd/blocks.0"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"fwd/blocks.0/eager"'
json_is culprit.occurrence 0
json_is culprit.basis '"confirmed"'
# The region apart from the op (regions.rank<r>.json, dtrace-fp(5)).
json_is culprit.region.scope '"fwd/blocks.0"'
json_is culprit.region.kind '"torch.compile"'
json_is culprit.region.part '"eager"'
json_true 'd["culprits"][0]["region"] == d["culprit"]["region"]'
json_true 'd["evidence"]["distinct_outputs"] >= 2'
# One cause, one culprit: with the op pinned the region agrees.
json_true 'len(d["culprits"]) == 1'

# A cause in a region's backward: --nondet dispatch-bwd's Dispatch function
# runs between the region's graph breaks, so its backward is an eager node of
# the region's backward, calling the combine op. torch never calls a compiled
# module's full backward hook; the recorder records the region's input
# gradients itself, so the layer pass names bwd/blocks.0 and the kernel pass
# the op that ran there.
ex --steps 1 --layers 1 --compile --nondet dispatch-bwd --run-dir c --checkpoint-dir cc
ex --steps 1 --layers 1 --compile --nondet dispatch-bwd --run-dir d --checkpoint-dir cd
run_dtrace 0 bisect --trust --timeout 900 --json c d
json_is verdict '"named"'
json_is culprit.scope '"bwd/blocks.0"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.basis '"confirmed"'
json_is culprit.region.scope '"bwd/blocks.0"'
json_is culprit.region.part null

# A cause outside every region (the head's backward, eager): the eager op, as
# on a model without regions.
ex --steps 1 --layers 1 --compile --nondet head-bwd --run-dir e --checkpoint-dir ce
ex --steps 1 --layers 1 --compile --nondet head-bwd --run-dir f --checkpoint-dir cf
run_dtrace 0 bisect --trust --timeout 900 --json e f
json_is verdict '"named"'
json_is culprit.scope '"bwd/head"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.basis '"confirmed"'
json_is culprit.region null
echo ok
