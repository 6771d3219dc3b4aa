#!/bin/bash
# Rank 1 crashed in step 2 after two records: the step has no end record.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/incomplete

run_dtrace 1 check "$D"
out_has "incomplete-step: $D/rank1.jsonl:11: rank 1, step 2: no end record after 2 records"

run_dtrace 1 check --json "$D"
json_is violation_counts '{"incomplete-step": 1}'
json_is violations.0.rank 1
json_is violations.0.step 2
json_is violations.0.location "\"$D/rank1.jsonl:11\""
