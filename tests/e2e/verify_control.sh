#!/usr/bin/env bash
# A control whose arms must diverge: a control that agrees fails the
# certificate (the check could not have seen a difference); one that diverges
# lets it stand.
. "$(dirname "$0")/minitrain-lib.sh"
expect_status 1 "$DTRACE" verify --json --control "$MINITRAIN --steps 3 --out theirs" -- "$MINITRAIN" --steps 3 --out mine
jq -e '.certified == false and .verdict == "identical" and .control.verdict == "identical"' out.txt >/dev/null ||
  fail "a control that agrees must fail: $(jq -c '{certified, verdict, control: .control.verdict}' out.txt)"
expect_status 1 "$DTRACE" verify --control "$MINITRAIN --steps 3 --out theirs" -- "$MINITRAIN" --steps 3 --out mine
grep -q "the control's arms agreed" out.txt || fail "text: $(cat out.txt)"

expect_status 0 "$DTRACE" verify --json --control "$MINITRAIN --steps 3 --nondet splitk --out theirs" -- \
  "$MINITRAIN" --steps 3 --out mine
jq -e '.certified and .control.verdict == "diverged" and .control.first.arms == ["control1", "control2"]' \
  out.txt >/dev/null || fail "a diverging control: $(jq -c .control.first out.txt)"
echo ok
