#!/usr/bin/env bash
# DTRACE_ISOLATE + DTRACE_INPUTS + DTRACE_REPEAT=K: a layer (or one op) runs
# alone from a capture K times, each repetition recorded as steps 0..K-1, and
# its outputs equal the captured ones; nothing else is written.
. "$(dirname "$0")/minitrain-lib.sh"
mt --steps 4 --ranks 2 --out run
mapfile -t argv < <(replay_argv run)
DTRACE_REPLAY_STEP=3 DTRACE_LEVEL=kernel DTRACE_SCOPE=bwd/layer.1/attn DTRACE_CAPTURE="$WORK/cap" \
  DTRACE_OUT="$WORK/capture-replay.jsonl" "${argv[@]}" >/dev/null
[ -f cap/capture.jsonl ] || fail "no capture index"

DTRACE_ISOLATE=bwd/layer.1/attn DTRACE_INPUTS="$WORK/cap" DTRACE_REPEAT=3 DTRACE_LEVEL=kernel \
  DTRACE_OUT="$WORK/layer.jsonl" "${argv[@]}" >/dev/null
expect_status 0 "$DTRACE" check layer.jsonl
for rank in 0 1; do
  steps=$(jq -r "select(.end and .rank == $rank) | .step" layer.jsonl | tr '\n' ' ')
  [ "$steps" = "0 1 2 " ] || fail "rank $rank repetitions: '$steps', expected 0 1 2"
done
# Every repetition's layer output equals the captured one.
want=$(jq -r 'select(.scope == "bwd/layer.1/attn" and .op == "attn" and .io == "out" and .rank == 0) | .name + "=" + .hash' capture-replay.jsonl | sort)
for k in 0 1 2; do
  got=$(jq -r "select(.step == $k and .scope == \"bwd/layer.1/attn\" and .op == \"attn\" and .io == \"out\" and .rank == 0) | .name + \"=\" + .hash" layer.jsonl | sort)
  [ "$got" = "$want" ] || fail "repetition $k: layer outputs differ from the capture"
done

# Without DTRACE_LEVEL an isolated run records at kernel level (the run's was step).
DTRACE_ISOLATE=bwd/layer.1/attn::softmax_grad DTRACE_INPUTS="$WORK/cap" DTRACE_REPEAT=2 \
  DTRACE_OUT="$WORK/op.jsonl" "${argv[@]}" >/dev/null
ops=$(jq -r 'select(.scope) | .op' op.jsonl | sort -u)
[ "$ops" = softmax_grad ] || fail "op isolation recorded ops: $ops"
[ "$(jq -r 'select(.end) | .step' op.jsonl | sort -u | tr '\n' ' ')" = "0 1 " ] || fail "op isolation: wrong repetitions"
[ "$(ls run)" = "$(printf 'rank0.jsonl\nrank0.status\nrank1.jsonl\nrank1.status')" ] || fail "isolation touched the run directory"
echo ok
