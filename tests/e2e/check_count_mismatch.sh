#!/bin/bash
# Rank 0's end record for step 1 counts 5 records; 3 are present.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/count_mismatch

run_dtrace 1 check "$D"
out_has "count-mismatch: $D/rank0.jsonl:6: rank 0, step 1: end record counts 5, 3 records are present"

run_dtrace 1 check --json "$D"
json_is violation_counts '{"count-mismatch": 1}'
json_is violations.0.step 1
