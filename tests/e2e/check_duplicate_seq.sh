#!/bin/bash
# Two different records of rank 1, step 1 share seq 1: seq is not strictly increasing.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/duplicate_seq

run_dtrace 1 check "$D"
out_has "seq-not-increasing: $D/rank1.jsonl:8: rank 1, step 1: seq 1 used by two records"
out_has "($D/rank1.jsonl:7)"

run_dtrace 1 check --json "$D"
json_is violation_counts '{"seq-not-increasing": 1}'
json_is violations.0.location "\"$D/rank1.jsonl:8\""
json_is violations.0.rank 1
json_is violations.0.step 1
