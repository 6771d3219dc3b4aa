#!/usr/bin/env bash
# One op called twice in a layer, only the second call nondeterministic
# (--nondet splitk-second-call: gemm_fc2 on each half of the rows, the second
# half split-K): bisect isolates call 2 (DTRACE_OCCURRENCE=1), confirms it, and
# names the call. When the op alone repeats itself but the layer's repetitions
# showed it differ, the verdict says it rests on the layer's repetitions.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bisect-lib.sh"
[ "$(planted splitk-second-call occurrence)" = 1 ] || fail "print-planted: occurrence"
[ "$(planted splitk-second-call calls)" = 2 ] || fail "print-planted: calls"
mt --steps 2 --level step --nondet splitk-second-call --chaos-seed 1 --out a
mt --steps 2 --level step --nondet splitk-second-call --chaos-seed 2 --out b
run_dtrace 1 diff a b
run_dtrace 0 bisect --trust --json
json_is verdict '"named"'
json_is culprit.op '"gemm_fc2"'
json_is culprit.scope '"fwd/layer.0/mlp"'
json_is culprit.occurrence 1
json_is culprit.calls 2
json_is culprit.basis '"confirmed"'
json_true 'd["evidence"]["distinct_outputs"] >= 2'
json_true 'all(r["env"].get("DTRACE_OCCURRENCE") == "1" for r in d["replays"] if r["stage"] == "confirm")'
json_true 'not any("DTRACE_OCCURRENCE" in r["env"] for r in d["replays"] if r["stage"] != "confirm")'
run_dtrace 0 bisect --trust
out_has "named: fwd/layer.0/mlp gemm_fc2, call 2 of 2 (origin)"
out_has "  basis:    confirmed alone"

# An op that alone repeats itself: named on the layer's repetitions.
export WORK
for side in a b; do
  head -n1 "$side/rank0.jsonl" | python3 -c 'import json, sys; print("\n".join(json.loads(sys.stdin.readline())["replay"]["argv"]))' >"argv-$side"
done
workload=$here/noncompliant-workload.py
# --launches: noncompliant-workload.py acts per launch (no replay sessions).
run_dtrace 0 bisect --launches --json --replay "$workload alone-repeats" a b
json_is verdict '"named"'
json_is culprit.occurrence 1
json_is culprit.basis '"layer-repetitions"'
json_is evidence.distinct_outputs 1
run_dtrace 0 bisect --launches --replay "$workload alone-repeats" a b
out_has "named on the layer's repetitions: fwd/layer.0/mlp gemm_fc2, call 2 of 2 (origin)"
out_has "  basis:    the layer's repetitions: re-run alone from one input, fwd/layer.0/mlp gave this op's output differing while its inputs matched (alone, from one input, it gave one output)"
echo ok
