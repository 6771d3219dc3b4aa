#!/bin/bash
# `--rank R` selects every step of one rank; with `--step` one step of it. JSON records follow the log format.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/rank_absent

run_dtrace 0 show --json --rank 1 "$D"
json_is ranks_absent '"2"'
json_is ranks_present 2
json_true 'len(d["selected"]) == 6 and all(r["rank"] == 1 for r in d["selected"])'
json_true '[(r["step"], r["seq"]) for r in d["selected"]] == [(0,0),(0,1),(0,2),(1,0),(1,1),(1,2)]'

run_dtrace 0 show --json --rank 1 --step 0 "$D"
json_is selected.0 "{\"step\": 0, \"rank\": 1, \"seq\": 0, \"scope\": \"step\", \"op\": \"loss\", \"io\": \"metric\", \"name\": \"loss\", \"dtype\": \"f32\", \"bits\": \"3f9e0400\", \"value\": 1.2344970703125, \"location\": \"$D/rank1.jsonl:2\"}"
json_is selected.2.shape '[2, 8]'
json_is selected.2.hash '"3e1436587a9cfc9e"'

run_dtrace 0 show --rank 1 --step 0 "$D"
out_has "ranks:      2 of 3 present (absent: 2)"
out_has "records (step 0, rank 1):"
out_has "    2 fwd/layer.0/mlp gemm_fc1 out y bf16 [2,8] 3e1436587a9cfc9e"

run_dtrace 0 show --rank 5 "$D"
out_has "records (rank 5): none"
