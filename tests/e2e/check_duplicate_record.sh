#!/bin/bash
# The same record (seq 2, same scope/op/io/name) written twice, and counted by the end record.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/duplicate_record

run_dtrace 1 check "$D"
out_has "duplicate-record: $D/rank0.jsonl:9: rank 0, step 1: record seq 2 fwd/layer.0/mlp gemm_fc1 out y written twice (also at $D/rank0.jsonl:8)"

run_dtrace 1 check --json "$D"
json_is violation_counts '{"duplicate-record": 1}'
json_is violations.0.kind '"duplicate-record"'
json_is violations.0.location "\"$D/rank0.jsonl:9\""
