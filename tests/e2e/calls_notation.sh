#!/bin/bash
# One notation for a call of a repeated op (dtrace(1), CALLS OF A REPEATED OP):
# gemm_fc1 runs twice per step (recomputation) and its second call's output
# differs at step 1, rank 1. diff (its first divergence and its rank list),
# watch, show and the HTML report all name it "call 2 of 2", counted from 1, the first call "call 1 of
# 2"; --json keeps the occurrence, counted from 0. (bisect:
# e2e/bisect_second_call.)
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/recomputed
call2="fwd/layer.0/mlp gemm_fc1 out y, call 2 of 2"

run_dtrace 1 diff "$D/a" "$D/b"
out_has "  first:   $call2 (seq 3)"
out_has "  rank 1  step 1  seq 3  $call2  value  origin"
out_lacks "#1"

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is first.occurrence 1

run_dtrace 1 watch "$D/b" --against "$D/a" --idle 0.2
out_has "  first:   $call2 (seq 3)"

run_dtrace 0 show --step 1 --rank 1 "$D/b"
out_has "    0 fwd/layer.0/mlp gemm_fc1 in x bf16 [4,8] "
out_has ", call 1 of 2"
grep -E '^    1 fwd/layer\.0/mlp gemm_fc1 out y bf16 \[4,16\] [0-9a-f]{16}, call 1 of 2$' "$OUT" >/dev/null ||
  fail "show does not name seq 1 the first call"
grep -E '^    3 fwd/layer\.0/mlp gemm_fc1 out y bf16 \[4,16\] [0-9a-f]{16}, call 2 of 2$' "$OUT" >/dev/null ||
  fail "show does not name seq 3 the second call"

run_dtrace 1 diff --html report.html "$D/a" "$D/b"
grep -qF "<h1>dtrace diff: diverged at step 1, rank 1: $call2</h1>" report.html ||
  fail "the HTML report's title does not name the call: $(grep -o '<h1>[^<]*' report.html)"
echo ok
