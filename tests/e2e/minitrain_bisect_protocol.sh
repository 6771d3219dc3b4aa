#!/usr/bin/env bash
# The replay protocol walked by hand the way `dtrace bisect` walks it, on a
# 4-rank step-level pair of runs with atomic-bias-grad planted (chaos unpinned,
# so the runs share one configuration): restore check, layer pass, kernel pass
# from a capture, confirmation of the one kernel -- each stage must point at
# what --print-planted names.
. "$(dirname "$0")/minitrain-lib.sh"
planted=$("$MINITRAIN" --print-planted atomic-bias-grad)
want_scope=$(jq -r .scope <<<"$planted")
want_op=$(jq -r .op <<<"$planted")
mt --steps 3 --ranks 4 --nondet atomic-bias-grad --out a
mt --steps 3 --ranks 4 --nondet atomic-bias-grad --out b
expect_status 1 "$DTRACE" diff --json a b
step=$(jq .first.step out.txt)
mapfile -t argv < <(replay_argv a)
replay() { env "$@" "${argv[@]}" >/dev/null; }

# 1. restore: the replayed step-start state is what each run recorded.
for run in a b; do
  replay DTRACE_REPLAY_STEP="$step" DTRACE_OUT="$WORK/restore-$run.jsonl"
  jq -c 'select(.io == "state")' "restore-$run.jsonl" > "state-replay-$run"
  jq -c "select(.io == \"state\" and .step == $step)" "$run"/rank*.jsonl > "state-run-$run"
  cmp -s <(sort "state-replay-$run") <(sort "state-run-$run") || fail "restore of $run differs"
done

# 2. layer pass: two replays of the step at layer level; the first origin is the planted layer.
replay DTRACE_REPLAY_STEP="$step" DTRACE_LEVEL=layer DTRACE_OUT="$WORK/layer-1.jsonl"
replay DTRACE_REPLAY_STEP="$step" DTRACE_LEVEL=layer DTRACE_OUT="$WORK/layer-2.jsonl"
expect_status 1 "$DTRACE" diff --json layer-1.jsonl layer-2.jsonl
[ "$(jq -r '.first.scope + " " + .first.role' out.txt)" = "$want_scope origin" ] ||
  fail "layer pass: $(jq -c '[.first.scope, .first.op, .first.role]' out.txt)"

# 3. kernel pass: capture the layer's inputs once, run the layer alone twice.
replay DTRACE_REPLAY_STEP="$step" DTRACE_LEVEL=kernel DTRACE_SCOPE="$want_scope" \
  DTRACE_CAPTURE="$WORK/cap" DTRACE_OUT="$WORK/capture.jsonl"
for k in 1 2; do
  replay DTRACE_REPLAY_STEP="$step" DTRACE_ISOLATE="$want_scope" DTRACE_INPUTS="$WORK/cap" \
    DTRACE_LEVEL=kernel DTRACE_OUT="$WORK/kernel-$k.jsonl"
done
expect_status 1 "$DTRACE" diff --json kernel-1.jsonl kernel-2.jsonl
[ "$(jq -r '.first.scope + " " + .first.op + " " + .first.role' out.txt)" = "$want_scope $want_op origin" ] ||
  fail "kernel pass: $(jq -c '[.first.scope, .first.op, .first.role]' out.txt)"

# 4. confirm: the kernel alone, 5 times, from identical inputs: 5 different outputs.
replay DTRACE_REPLAY_STEP="$step" DTRACE_ISOLATE="$want_scope::$want_op" DTRACE_INPUTS="$WORK/cap" \
  DTRACE_REPEAT=5 DTRACE_LEVEL=kernel DTRACE_OUT="$WORK/confirm.jsonl"
inputs=$(jq -r 'select(.rank == 0 and .io == "in") | .hash' confirm.jsonl | sort -u | wc -l)
outputs=$(jq -r 'select(.rank == 0 and .io == "out") | .hash' confirm.jsonl | sort -u | wc -l)
[ "$inputs" -eq 1 ] && [ "$outputs" -eq 5 ] || fail "confirm: $inputs distinct inputs, $outputs distinct outputs"
echo ok
