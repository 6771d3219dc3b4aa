#!/bin/bash
# `dtrace show` on a run whose rank 1 crashed in step 2, and `--step 2` prints that step's records.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/incomplete

run_dtrace 0 show "$D"
out_has "complete:   no"
out_has "  rank 1: steps 0-2 (3), 8 records, 1 unfinished:"
out_has "    step 2: incomplete, 2 records, no end record ($D/rank1.jsonl:10)"

run_dtrace 0 show --step 2 "$D"
out_has "records (step 2):"
out_has "  rank 0, step 2:"
out_has "  rank 1, step 2 (incomplete):"
out_has "    0 step loss metric loss f32 - 3f9e0402 1.234497308731079"
out_has "    1 fwd/layer.0/mlp gemm_fc1 in x bf16 [2,4] 3e1436587abb6235"
[ "$(grep -c '^    [0-9]' "$OUT")" = 5 ] || fail "step 2 has 3 records on rank 0 and 2 on rank 1"

run_dtrace 0 show --json --step 2 "$D"
json_is complete false
json_is ranks.1.unfinished.0.status '"incomplete"'
json_is ranks.1.unfinished.0.declared_count null
json_is selection '{"step": 2, "rank": null}'
json_true 'len(d["selected"]) == 5'
json_true '[(r["rank"], r["seq"]) for r in d["selected"]] == [(0,0),(0,1),(0,2),(1,0),(1,1)]'
json_is selected.3.step_status '"incomplete"'
