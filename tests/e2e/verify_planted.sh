#!/usr/bin/env bash
# With a planted switch on (--nondet splitk) the arms diverge: verify exits 1
# and names the first divergence; --keep leaves the arms for diff and bisect.
. "$(dirname "$0")/minitrain-lib.sh"
expect_status 1 "$DTRACE" verify --json --keep kept -- "$MINITRAIN" --steps 3 --level layer --nondet splitk --out mine
jq -e '.certified == false and .verdict == "diverged"' out.txt >/dev/null || fail "certified despite splitk"
[ "$(jq -r '.first.step, .first.scope, .first.role, (.first.arms | join(" "))' out.txt | paste -sd' ')" = \
  "0 fwd/layer.0/mlp origin arm1 arm2" ] || fail "first divergence: $(jq -c .first out.txt)"
[ "$(jq -r .kept out.txt)" = "$WORK/kept" ] || fail "kept: $(jq -r .kept out.txt)"
expect_status 1 "$DTRACE" diff kept/arm1 kept/arm2

expect_status 1 "$DTRACE" verify -- "$MINITRAIN" --steps 3 --level layer --nondet splitk --out mine
grep -q "^NOT certified: run-to-run reproducibility (2 independent arms): the arms diverged" out.txt ||
  fail "text: $(cat out.txt)"
grep -q "first divergence: arm1 vs arm2 at step 0, rank 0: fwd/layer.0/mlp mlp out y (value, origin)" out.txt ||
  fail "text first: $(cat out.txt)"
echo ok
