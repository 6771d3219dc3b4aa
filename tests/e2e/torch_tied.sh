#!/usr/bin/env bash
# One parameter, two uses a step: with --tie-weights the output head uses the
# token embedding's weight, and --nondet head-bwd makes the head's backward add
# each token's contribution to that weight's gradient with the combine op in a
# random order (the gradient it passes on is exact). The step's grads differ in
# embed.weight, the one name of the shared parameter; at layer level each use's
# contribution is recorded in the scope of the module that used it (bwd/head and
# bwd/embed, param_grad.weight), so bisect --trust names bwd/head and the op in
# it, dtrace_example.combine.default, confirmed, not the embedding.
. "$(dirname "$0")/torch-lib.sh"
ex --steps 2 --tie-weights --nondet head-bwd --run-dir a --checkpoint-dir ca --checkpoint-every 1
ex --steps 2 --tie-weights --nondet head-bwd --run-dir b --checkpoint-dir cb --checkpoint-every 1
run_dtrace 1 diff --json a b
json_is first.step 0
json_is first.op '"grads"'
json_is first.name '"embed.weight"'
run_dtrace 0 bisect --trust --timeout 600 --json a b
json_is verdict '"named"'
json_is layer '"bwd/head"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"bwd/head"'
json_is culprit.role '"origin"'
json_is culprit.basis '"confirmed"'
json_true 'd["evidence"]["distinct_outputs"] >= 2'
# Both uses recorded at layer level, each in the scope of the module that used
# it, once per step; the step's grads name the shared parameter once.
ex --steps 1 --tie-weights --level layer --run-dir l
"$PYTHON" - <<'PY' || fail "a layer-level run with tied weights: one contribution per use"
import json
records = [json.loads(l) for l in open("l/rank0.jsonl") if '"scope"' in l]
uses = sorted((r["scope"], r["op"], r["io"]) for r in records if r["name"] == "param_grad.weight"
              and r["scope"] in ("bwd/embed", "bwd/head"))
assert uses == [("bwd/embed", "Embedding", "out"), ("bwd/head", "Linear", "out")], uses
assert [r["name"] for r in records if r["op"] == "grads" and "embed.weight" in r["name"]] == ["embed.weight"]
assert not any(r["op"] == "grads" and r["name"].startswith("head.") for r in records)
PY
echo ok
