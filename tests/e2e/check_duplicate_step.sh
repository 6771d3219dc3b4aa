#!/bin/bash
# Rank 0's step 1 written twice, records and end record (a log concatenated
# with part of itself): one duplicate-step at the second copy, and nothing
# else (not late-records, and the chains are checked against the first copy).
. "$(dirname "$0")/check-lib.sh"
A=$TESTDATA/minitrain/same-a
D=$WORK/run
mkdir "$D"
cp "$A/rank1.jsonl" "$D/"
relayout "$A/rank0.jsonl" "$D/rank0.jsonl" 0 1 1 2
run_dtrace 1 check "$D"
out_has "duplicate-step: $D/rank0.jsonl:154: rank 0, step 1: written twice"
run_dtrace 1 check --json "$D"
json_is violation_counts '{"duplicate-step": 1}'
