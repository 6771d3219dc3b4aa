#!/bin/bash
# Rank 0's end record for step 1 counts one record more than there are. That
# is one count-mismatch, reported once: step 2, chained to step 1's logged
# chain, is no chain-mismatch, though step 1 is only known miscounted once
# every file is read.
. "$(dirname "$0")/check-lib.sh"
D=$WORK/run
cp -r "$TESTDATA/minitrain/same-a" "$D"
sed -i '153s/"count":75/"count":76/' "$D/rank0.jsonl"

run_dtrace 1 check "$D"
out_has "count-mismatch: $D/rank0.jsonl:78: rank 0, step 1: end record counts 76, 75 records are present"
run_dtrace 1 check --json "$D"
json_is violation_counts '{"count-mismatch": 1}'
