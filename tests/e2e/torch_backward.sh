#!/usr/bin/env bash
# A cause that lives only in a backward: --nondet dispatch-bwd makes the MoE
# dispatch's backward add each token's gradients in a random order (the forward
# is exact). Two runs diverge at step 0 in the gradients; bisect --trust isolates
# the MoE layer's backward (DTRACE_ISOLATE=bwd/blocks.1.moe: its forward from the
# captured arguments, its backward from the captured output gradients) and names
# the op, dtrace_example.combine.default, in scope bwd/blocks.1.moe. Without the
# switch, the isolated backward repeats itself bit for bit and records the
# input and parameter gradients.
. "$(dirname "$0")/torch-lib.sh"

# The isolated backward of a deterministic run: capture, then K=2 repetitions.
ex --steps 1 --run-dir n --checkpoint-dir cn
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=kernel DTRACE_SCOPE=bwd/blocks.1.moe DTRACE_CAPTURE=cap \
  DTRACE_OUT=capture.jsonl ex --steps 1 --run-dir n --checkpoint-dir cn
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=kernel DTRACE_SCOPE=bwd/blocks.1.moe DTRACE_ISOLATE=bwd/blocks.1.moe \
  DTRACE_INPUTS=cap DTRACE_REPEAT=2 DTRACE_OUT=isolated.jsonl ex --steps 1 --run-dir n --checkpoint-dir cn
"$PYTHON" - <<'PY' || fail "the isolated backward of bwd/blocks.1.moe"
import json
records = [json.loads(l) for l in open("isolated.jsonl") if '"scope"' in l]
layer = {}
for r in records:
    assert r["scope"] == "bwd/blocks.1.moe", r
    if r["op"] == "MoE":
        layer.setdefault(r["step"], {})[(r["io"], r["name"])] = r["hash"]
assert sorted(layer) == [0, 1], sorted(layer)
for step, recs in layer.items():
    for want in [("in", "input.0"), ("in", "rng.cpu"), ("in", "grad_output.0"), ("out", "grad_input.0"),
                 ("out", "param_grad.router.weight"), ("out", "param_grad.experts.0.up.weight")]:
        assert want in recs, (step, want, sorted(recs))
assert layer[0] == layer[1], "deterministic backward gave different repetitions"
# The backward's kernels, in the layer's scope.
assert any(r["op"] == "aten.gelu_backward.default" for r in records)
# The isolated repetitions ran from what the capture replay recorded.
captured = {(r["io"], r["name"]): r["hash"] for r in map(json.loads, open("capture.jsonl"))
            if r.get("op") == "MoE" and r["scope"] == "bwd/blocks.1.moe"}
assert captured[("in", "grad_output.0")] == layer[0][("in", "grad_output.0")]
assert captured[("out", "grad_input.0")] == layer[0][("out", "grad_input.0")], "isolation differs from the step"
PY

ex --steps 2 --nondet dispatch-bwd --run-dir a --checkpoint-dir ca --checkpoint-every 1
ex --steps 2 --nondet dispatch-bwd --run-dir b --checkpoint-dir cb --checkpoint-every 1
run_dtrace 1 diff --json a b
json_is first.step 0
json_is first.op '"grads"'
run_dtrace 0 bisect --trust --timeout 600 --json a b
json_is verdict '"named"'
json_is layer '"bwd/blocks.1.moe"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"bwd/blocks.1.moe"'
json_is culprit.role '"origin"'
json_true 'any(r["stage"] == "kernel" and r["env"].get("DTRACE_ISOLATE") == "bwd/blocks.1.moe"
               and r["exit"] == 0 for r in d["replays"])'
json_true 'd["evidence"]["distinct_outputs"] >= 2'
echo ok
