#!/bin/bash
# Rank 1's end record for step 0 counts 2; a third record follows it.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/late

run_dtrace 1 check "$D"
out_has "late-records: $D/rank1.jsonl:5: rank 1, step 0: 1 record after the end record"

run_dtrace 1 check --json "$D"
json_is violation_counts '{"late-records": 1}'
json_is violations.0.location "\"$D/rank1.jsonl:5\""
