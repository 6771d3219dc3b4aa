#!/usr/bin/env bash
# Two ranks over gloo started through a launcher (tools/torch/launch2.sh, as
# torchrun would start them: Debian's torchrun 1.13 fails on Python 3.11), the
# planted combine on rank 1 only, checkpointed per rank. DTRACE_TORCH_LAUNCHER
# makes the launcher line the runs' replay command, so bisect's replays restart
# both ranks; bisect --trust names the planted op on rank 1, and afterwards no
# process of the test is left (/proc).
. "$(dirname "$0")/torch-lib.sh"
LAUNCH="$SOURCE_ROOT/tools/torch/launch2.sh"
for r in a b; do
  DTRACE_TORCH_LAUNCHER="$LAUNCH" "$LAUNCH" "$PYTHON" "$EXAMPLE" --steps 2 --nondet combine --nondet-rank 1 \
    --run-dir $r --checkpoint-dir c$r --checkpoint-every 1 >/dev/null 2>"$WORK/$r.err" ||
    { cat "$WORK/$r.err" >&2; fail "launching run $r"; }
done
[ -f ca/rank0/step-0.pt ] && [ -f ca/rank1/step-0.pt ] || fail "no per-rank checkpoints"
run_dtrace 0 bisect --trust --timeout 600 --json a b
json_is verdict '"named"'
json_is culprit.rank 1
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"fwd/blocks.0.moe"'
here=$(pwd -P)
for p in /proc/[0-9]*; do
  [ "$(readlink "$p/cwd" 2>/dev/null)" = "$here" ] && [ "${p#/proc/}" != $$ ] &&
    fail "process ${p#/proc/} still runs in the test directory: $(tr '\0' ' ' < "$p/cmdline")"
done
echo ok
