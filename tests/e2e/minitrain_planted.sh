#!/usr/bin/env bash
# Each --nondet switch makes two runs diverge, and at kernel level the first
# divergence dtrace diff reports is an origin at exactly the op and scope
# `minitrain --print-planted` names; with the same --chaos-seed the runs agree,
# and with no switch they agree whatever the chaos seed.
. "$(dirname "$0")/minitrain-lib.sh"
check_switch() {
  local name=$1 ranks=$2
  local planted want_op want_scope
  planted=$("$MINITRAIN" --print-planted "$name")
  want_op=$(jq -r .op <<<"$planted")
  want_scope=$(jq -r .scope <<<"$planted")
  common=(--steps 2 --ranks "$ranks" --level kernel --nondet "$name")
  local run="$name-r$ranks"
  mt "${common[@]}" --chaos-seed 1 --out "$run-1"
  mt "${common[@]}" --chaos-seed 2 --out "$run-2"
  mt "${common[@]}" --chaos-seed 1 --out "$run-1again"
  expect_status 1 "$DTRACE" diff --json "$run-1" "$run-2"
  got=$(jq -r '[.first.scope, .first.op, .first.role, .first.step] | join(" ")' "$WORK/out.txt")
  [ "$got" = "$want_scope $want_op origin 0" ] ||
    fail "$name: first divergence '$got', expected '$want_scope $want_op origin 0'"
  expect_status 0 "$DTRACE" diff "$run-1" "$run-1again"
}
for name in atomic-bias-grad splitk autotune fused-ce uninit-pad; do check_switch "$name" 1; done
check_switch allreduce-arrival 4
check_switch atomic-bias-grad 4

# No switch: the chaos seed changes nothing.
mt --steps 2 --level kernel --chaos-seed 1 --out plain-1
mt --steps 2 --level kernel --chaos-seed 2 --out plain-2
expect_status 0 "$DTRACE" diff plain-1 plain-2

# Unpinned chaos is fresh each run: two unpinned runs diverge.
mt --steps 2 --level step --nondet splitk --out fresh-1
mt --steps 2 --level step --nondet splitk --out fresh-2
expect_status 1 "$DTRACE" diff fresh-1 fresh-2

# The ground truth never reaches a log.
! grep -q planted splitk-r1-1/rank0.jsonl || fail "the log mentions the planted op"
echo ok
