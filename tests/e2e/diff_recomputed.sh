#!/bin/bash
# gemm_fc1 runs twice per step (recomputation); its second output differs: first.occurrence is 1.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/recomputed

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is first.step 1
json_is first.rank 1
json_is first.seq 3
json_is first.op '"gemm_fc1"'
json_is first.io '"out"'
json_is first.name '"y"'
json_is first.occurrence 1
json_is first.kind '"value"'
json_is first.role '"origin"'
json_is compared.records 42

run_dtrace 1 diff "$D/a" "$D/b"
out_has "fwd/layer.0/mlp gemm_fc1 out y, call 2 of 2 (seq 3)"
