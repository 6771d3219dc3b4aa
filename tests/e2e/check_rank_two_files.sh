#!/bin/bash
# A rank spread over two files, valid by dtrace-fp(5) (records may sit in any
# file): rank 0's steps 0-1 in one file, step 2 in another, which the reader
# reaches before step 1. Chains are checked in each rank's step order: no
# chain-mismatch; a record changed in step 1 is still found, once (step 2 is
# chained to step 1's logged chain).
. "$(dirname "$0")/check-lib.sh"
A=$TESTDATA/minitrain/same-a
D=$WORK/run
mkdir "$D"
cp "$A/rank1.jsonl" "$D/"
relayout "$A/rank0.jsonl" "$D/rank0.jsonl" 0 1
relayout "$A/rank0.jsonl" "$D/rank0b.jsonl" 2
run_dtrace 0 check "$D"

alter "$D/rank0.jsonl" 1
run_dtrace 1 check --json "$D"
json_is violation_counts '{"chain-mismatch": 1}'
json_is violations.0.step 1
json_is violations.0.rank 0
