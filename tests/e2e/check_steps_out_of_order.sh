#!/bin/bash
# One rank file with its steps out of order (1, 0, 2), valid by dtrace-fp(5):
# chain_prev is the closest earlier step by step number, so the chains are
# checked in step order: no chain-mismatch; a record changed in step 0 is
# still found, once.
. "$(dirname "$0")/check-lib.sh"
A=$TESTDATA/minitrain/same-a
D=$WORK/run
mkdir "$D"
cp "$A/rank1.jsonl" "$D/"
relayout "$A/rank0.jsonl" "$D/rank0.jsonl" 1 0 2
run_dtrace 0 check "$D"

alter "$D/rank0.jsonl" 0
run_dtrace 1 check --json "$D"
json_is violation_counts '{"chain-mismatch": 1}'
json_is violations.0.step 0
