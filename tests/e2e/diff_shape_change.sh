#!/bin/bash
# An output whose shape changed (rank 0, step 2, y [4,16] vs [4,32]) is a structure mismatch at an origin.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/shape_change

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is first.step 2
json_is first.rank 0
json_is first.name '"y"'
json_is first.kind '"structure"'
json_is first.role '"origin"'
json_is first.a.shape '[4, 16]'
json_is first.b.shape '[4, 32]'
json_true '"[4,16]" in d["first"]["detail"] and "[4,32]" in d["first"]["detail"]'

run_dtrace 1 diff "$D/a" "$D/b"
out_has "structure: shape [4,16] in A, [4,32] in B"
