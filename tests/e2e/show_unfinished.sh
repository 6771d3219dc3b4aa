#!/bin/bash
# `dtrace show` names miscounted and late steps with where they start; exit 0 (showing is not certifying).
. "$(dirname "$0")/lib.sh"

D=$TESTDATA/check/count_mismatch
run_dtrace 0 show "$D"
out_has "complete:   no"
out_has "    step 1: count-mismatch, 3 records, end record counts 5 ($D/rank0.jsonl:6)"
run_dtrace 0 show --json "$D"
json_is ranks.0.unfinished.0 "{\"step\": 1, \"status\": \"count-mismatch\", \"declared_count\": 5, \"records\": 3, \"location\": \"$D/rank0.jsonl:6\"}"
json_is ranks.0.complete_steps '"0"'
json_is ranks.0.steps '"0-1"'

D=$TESTDATA/check/late
run_dtrace 0 show "$D"
out_has "    step 0: late, 1 record after the step's end record ($D/rank1.jsonl:5)"
run_dtrace 0 show --json --rank 1 --step 0 "$D"
json_is ranks.1.unfinished_count 1
json_true '[r["seq"] for r in d["selected"]] == [0, 1, 2]'
json_is selected.2.step_status '"late"'
