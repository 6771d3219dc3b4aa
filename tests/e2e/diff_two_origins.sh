#!/bin/bash
# Ranks 1 and 3 of 4 are origins at step 1; ranks 0 and 2 receive the divergence through the allreduce.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/two_origins

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is verdict '"diverged"'
json_is first.step 1
json_is first.rank 1
json_is first.role '"origin"'
json_is first.op '"gemm_fc1"'
json_is first.io '"out"'
json_is first.name '"y"'
json_is first.seq 1
json_true '[m["rank"] for m in d["ranks"]] == [0, 1, 2, 3]'
json_true '[m["role"] for m in d["ranks"]] == ["receiver", "origin", "receiver", "origin"]'
json_true 'all(m["step"] == 1 for m in d["ranks"])'
json_is ranks.0.scope '"comm/grad_allreduce"'
json_is ranks.0.op '"all_reduce"'
json_is ranks.0.io '"out"'
json_is ranks.2.seq 3
json_is ranks.3.op '"gemm_fc1"'
json_is compared.ranks 4
json_is compared.records 60

run_dtrace 1 diff "$D/a" "$D/b"
out_has "diverged at step 1, rank 1"
out_has "diverged ranks (4):"
out_has "rank 3  step 1  seq 1  fwd/layer.0/mlp gemm_fc1 out y  value  origin"
out_has "rank 2  step 1  seq 3  comm/grad_allreduce all_reduce out grad  value  receiver"
