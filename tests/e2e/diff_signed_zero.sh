#!/bin/bash
# +0.0 against -0.0 (bits 00000000 vs 80000000) is a mismatch: comparison uses bits, not values.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/signed_zero

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is verdict '"diverged"'
json_is first.step 2
json_is first.rank 0
json_is first.name '"loss"'
json_is first.kind '"value"'
json_is first.role '"unknown"'
json_is first.a.bits '"00000000"'
json_is first.b.bits '"80000000"'
json_is first.ulp 1
json_true 'len(d["ranks"]) == 1'
