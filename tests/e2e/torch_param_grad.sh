#!/usr/bin/env bash
# A cause that changes only a parameter's gradient: --nondet embed-bwd makes the
# token embedding's backward (a custom autograd Function) add the rows of its
# weight gradient with the combine op in a random order; its forward is exact and
# its input needs no gradient. Two runs differ at step 0 in the step's grads
# (embed.weight) only. At layer level the embedding's backward records its
# contribution to its weight's gradient (bwd/embed, out param_grad.weight), so
# bisect --trust names the layer bwd/embed and the op in it,
# dtrace_example.combine.default, confirmed. Without the switch, the isolated
# backward of bwd/embed records what the layer level records.
. "$(dirname "$0")/torch-lib.sh"

# The deterministic embedding's backward: a capture of bwd/embed (kernel level),
# then the backward alone, twice, from that capture.
ex --steps 1 --run-dir n --checkpoint-dir cn
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=kernel DTRACE_SCOPE=bwd/embed DTRACE_CAPTURE=cap \
  DTRACE_OUT=capture.jsonl ex --steps 1 --run-dir n --checkpoint-dir cn
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=kernel DTRACE_SCOPE=bwd/embed DTRACE_ISOLATE=bwd/embed \
  DTRACE_INPUTS=cap DTRACE_REPEAT=2 DTRACE_OUT=isolated.jsonl ex --steps 1 --run-dir n --checkpoint-dir cn
"$PYTHON" - <<'PY' || fail "bwd/embed: the layer level's records against the isolation's"
import json
captured = [json.loads(l) for l in open("capture.jsonl") if '"scope"' in l]
layer = {(r["io"], r["name"]): r["hash"] for r in captured if r["op"] == "Embedding"}
# The embedding's own backward: its output gradient in, its weight's gradient out;
# its input (token ids) needs none.
assert set(layer) >= {("in", "grad_output.0"), ("out", "param_grad.weight")}, sorted(layer)
assert not any(n.startswith("grad_input") for _, n in layer), sorted(layer)
# The kernels of its backward are in its scope (torch calls its full backward
# hook before they run: the scope is left when the weight's node has run).
assert any(r["op"] == "aten.embedding_dense_backward.default" and r["io"] == "out" for r in captured), \
    sorted({r["op"] for r in captured})
isolated = [json.loads(l) for l in open("isolated.jsonl") if '"scope"' in l]
reps = {}
for r in isolated:
    assert r["scope"] == "bwd/embed", r
    if r["op"] == "Embedding":
        reps.setdefault(r["step"], {})[(r["io"], r["name"])] = r["hash"]
assert sorted(reps) == [0, 1], sorted(reps)
for k, recs in reps.items():
    assert recs[("out", "param_grad.weight")] == layer[("out", "param_grad.weight")], (k, recs, layer)
    assert recs[("in", "grad_output.0")] == layer[("in", "grad_output.0")], (k, recs, layer)
PY

ex --steps 2 --nondet embed-bwd --run-dir a --checkpoint-dir ca --checkpoint-every 1
ex --steps 2 --nondet embed-bwd --run-dir b --checkpoint-dir cb --checkpoint-every 1
run_dtrace 1 diff --json a b
json_is first.step 0
json_is first.op '"grads"'
json_is first.name '"embed.weight"'
run_dtrace 0 bisect --trust --timeout 600 --json a b
json_is verdict '"named"'
json_is layer '"bwd/embed"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"bwd/embed"'
json_is culprit.role '"origin"'
json_is culprit.basis '"confirmed"'
json_true 'any(r["stage"] == "kernel" and r["env"].get("DTRACE_ISOLATE") == "bwd/embed"
               and r["exit"] == 0 for r in d["replays"])'
json_true 'any(r["stage"] == "confirm" and r["env"].get("DTRACE_ISOLATE") == "bwd/embed::dtrace_example.combine.default"
               and r["exit"] == 0 for r in d["replays"])'
json_true 'd["evidence"]["distinct_outputs"] >= 2'
run_dtrace 0 bisect --trust --timeout 600 a b
out_has "bwd/embed"
echo ok
