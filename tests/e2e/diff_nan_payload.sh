#!/bin/bash
# NaNs with different payloads (7fc00000 vs 7fc00001) mismatch; the ulp distance of a NaN is null.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/nan_payload

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is verdict '"diverged"'
json_is first.step 2
json_is first.rank 1
json_is first.kind '"value"'
json_is first.a.bits '"7fc00000"'
json_is first.b.bits '"7fc00001"'
json_is first.ulp null

run_dtrace 1 diff "$D/a" "$D/b"
out_has "bits 7fc00000 in A, 7fc00001 in B"
out_lacks "ulp"
