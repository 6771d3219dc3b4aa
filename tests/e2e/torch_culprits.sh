#!/usr/bin/env bash
# Every culprit in one bisect (dtrace(1), EVERY CULPRIT) on the PyTorch example:
# a one-block model with two planted causes, the MoE combine of random order
# in the forward (a custom op) and the embedding's backward accumulated in a
# random order; two runs diverge at step 0, and one `bisect --trust` names
# both, in the order --print-planted lists them (a step's), the second found
# with the first pinned (dtrace_torch's dispatch mode returns the pinned
# output), and ends because nothing else differs with both pinned. Sessions,
# and in suite 'launches' a launch per replay.
. "$(dirname "$0")/torch-lib.sh"
plants=(--layers 1 --nondet combine --nondet embed-bwd)
ex --steps 2 "${plants[@]}" --run-dir a --checkpoint-dir ca --checkpoint-every 1
ex --steps 2 "${plants[@]}" --run-dir b --checkpoint-dir cb --checkpoint-every 1
truth=$("$PYTHON" "$EXAMPLE" "${plants[@]}" --print-planted | jq -sc '[.[] | [.scope, .op]]')
[ "$(jq length <<<"$truth")" = 2 ] || fail "--print-planted lists $truth"
run_dtrace 0 bisect --trust --timeout 600 --json --step 0 --rank 0 a b
json_is verdict '"named"'
json_true "[[c['scope'], c['op']] for c in d['culprits']] == $truth"
json_true 'd["culprits"][1]["pinned"] == [d["culprits"][0]["scope"] + " " + d["culprits"][0]["op"]]'
json_true 'all(c["role"] == "origin" for c in d["culprits"])'
json_is search.stop '"agree"'
json_true 'd["search"]["end"].endswith("nothing else differs with them pinned")'
echo ok
