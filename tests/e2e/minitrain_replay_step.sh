#!/usr/bin/env bash
# DTRACE_REPLAY_STEP=N: restore the state at the start of step N (nearest
# checkpoint, else initialization, then fast-forward unrecorded), record that
# step only into DTRACE_OUT -- the same records the run wrote for it -- and
# write nothing else: not the run directory, not the checkpoints.
. "$(dirname "$0")/minitrain-lib.sh"
mt --steps 10 --ranks 2 --level layer --checkpoint-every 3 --checkpoint-dir ck --out run
mapfile -t argv < <(replay_argv run)
[ "$(head -n1 run/rank0.jsonl | jq -r .replay.protocol)" = dtrace-replay/1.3 ] || fail "header lacks the protocol (1.3: minitrain serves replay sessions and honours pins)"
snapshot() { find run ck -exec stat -c "%n %s %Y" {} + | sort; find run ck -type f -exec md5sum {} + | sort; }
before=$(snapshot)

for step in 7 1; do  # from checkpoint 6 with one step fast-forwarded; from initialization
  DTRACE_REPLAY_STEP=$step DTRACE_OUT="$WORK/replay-$step.jsonl" "${argv[@]}" >/dev/null
  steps=$(records "replay-$step.jsonl" | jq -s '[.[].step] | unique | join(",")' -r)
  [ "$steps" = "$step" ] || fail "replay of step $step recorded steps $steps"
  grep -q '"io":"state"' "replay-$step.jsonl" || fail "replay of step $step recorded no state"
  expect_status 0 "$DTRACE" check "replay-$step.jsonl"
  expect_status 0 "$DTRACE" diff run "replay-$step.jsonl"
done
[ "$before" = "$(snapshot)" ] || fail "a replay changed the run directory or the checkpoints"
# The listing is read whole (`ls | grep -q` under pipefail reads as no match
# when grep's early exit kills ls with SIGPIPE).
stray=$(ls "$WORK" | grep -vE '^(run|ck|replay-[0-9]+\.jsonl|out\.txt|err\.txt)$' || true)
[ -z "$stray" ] || fail "a replay wrote elsewhere: $stray"

# DTRACE_LEVEL overrides the run's level; DTRACE_SCOPE limits kernel records.
DTRACE_REPLAY_STEP=2 DTRACE_LEVEL=kernel DTRACE_SCOPE=fwd/layer.1 DTRACE_OUT="$WORK/scoped.jsonl" "${argv[@]}" >/dev/null
jq -r 'select(.op == "gemm_fc1") | .scope' scoped.jsonl | sort -u | grep -x fwd/layer.1/mlp >/dev/null || fail "no kernel records in scope"
jq -r 'select(.op == "gemm_fc1") | .scope' scoped.jsonl | grep layer.0 >/dev/null && fail "kernel records outside DTRACE_SCOPE"
echo ok
