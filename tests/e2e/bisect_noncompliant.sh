#!/usr/bin/env bash
# bisect checks that each replay gave what it asked for before concluding from
# it. A workload that breaks the protocol in one way (noncompliant-workload.py,
# minitrain behind a wrapper) stops bisect with exit 2 and a message saying
# what the workload did instead; the same wrapper keeping the protocol names
# the kernel, so it is the broken rule that stops it.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bisect-lib.sh"
workload=$here/noncompliant-workload.py
export WORK

# argv_of RUN: the run's replay argv, one word per line (the wrapper reads it).
argv_of() {
  head -n1 "$1/rank0.jsonl" | python3 -c 'import json, sys; print("\n".join(json.loads(sys.stdin.readline())["replay"]["argv"]))'
}
# runs SWITCH: runs a and b with SWITCH planted, pinned to differ, and their argv.
runs() {
  rm -rf a b
  mt --steps 2 --level step --nondet "$1" --chaos-seed 1 --out a
  mt --steps 2 --level step --nondet "$1" --chaos-seed 2 --out b
  argv_of a >argv-a
  argv_of b >argv-b
}
# --launches: the wrapper acts per launch (the replay's variables in its own
# environment), so it cannot serve the replay sessions minitrain announces.
# refused MODE MESSAGE: bisect with the workload in MODE exits 2, prints no
# report, and its error says MESSAGE.
refused() {
  run_dtrace 2 bisect --launches --json --replay "$workload $1" a b
  [ ! -s "$OUT" ] || fail "$1: a report was printed"
  grep -q "^dtrace: error: " "$ERR" || fail "$1: no error line"
  grep "^dtrace: error: " "$ERR" | grep -F -- "$2" >/dev/null || fail "$1: the error does not say: $2"
}

runs splitk
scope=$(planted splitk scope)
run_dtrace 0 bisect --launches --json --replay "$workload comply" a b
json_is verdict '"named"'
json_is culprit.op "\"$(planted splitk op)\""

refused ignore-isolate "replay of run A (kernel): the workload ignored DTRACE_ISOLATE: it recorded 1 step (step 0) of "
err_has "instead of 3 repetitions of $scope (step 0 holds step "
refused ignore-repeat "replay of run A (kernel): the workload ignored DTRACE_REPEAT=3: it recorded 1 step (step 0) of "
err_has "at scope $scope instead of 3 repetitions of $scope (steps 0-2)"
refused ignore-replay-step "replay of run A (layer): the workload ignored DTRACE_REPLAY_STEP=0: it recorded 2 steps (steps 0-1) of "
refused ignore-level "replay of run A (layer): the workload ignored DTRACE_LEVEL=layer: its log says level \"step\""
refused no-state "replay of run A (layer): the workload recorded no restored state at step 0 (no io \"state\" record; run A recorded "
refused no-capture "replay of run A (capture): the workload left no usable capture in DTRACE_CAPTURE="
# minitrain announces dtrace-replay/1.3: a replay that does not take the pin
# of the op named first would let that op vary on, and is refused.
refused ignore-pin "replay of run A (layer): the workload announces dtrace-replay/1.3 but did not take the pins DTRACE_PIN="
err_has "r1-layer-A-0/rank0.pins (a recorder that honours pins writes it)"

# An op called twice in the layer, the second call nondeterministic: a
# workload that cannot tell the calls apart re-runs the first.
runs splitk-second-call
run_dtrace 0 bisect --launches --json --replay "$workload comply" a b
json_is culprit.occurrence 1
refused ignore-occurrence "replay of run A (confirm): the workload ignored DTRACE_OCCURRENCE=1: its repetitions ran fwd/layer.0/mlp gemm_fc2, call 1 of 2 (input 'x' "
err_has ") instead of call 2 of 2"
echo ok
