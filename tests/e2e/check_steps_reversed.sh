#!/bin/bash
# Both ranks' steps written last to first (2, 1, 0), valid by dtrace-fp(5):
# no chain-mismatch; a record changed in rank 1's step 1 is still found, once,
# with its place.
. "$(dirname "$0")/check-lib.sh"
A=$TESTDATA/minitrain/same-a
D=$WORK/run
mkdir "$D"
relayout "$A/rank0.jsonl" "$D/rank0.jsonl" 2 1 0
relayout "$A/rank1.jsonl" "$D/rank1.jsonl" 2 1 0
run_dtrace 0 check "$D"

alter "$D/rank1.jsonl" 1
run_dtrace 1 check "$D"
out_has "chain-mismatch: $D/rank1.jsonl:78: rank 1, step 1: end record's chain"
run_dtrace 1 check --json "$D"
json_is violation_counts '{"chain-mismatch": 1}'
