#!/bin/bash
# The two files disagree on level and on env NCCL_ALGO: violations at the second file's header.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/header_mismatch

run_dtrace 1 check "$D"
out_has "header-mismatch: $D/rank1.jsonl:1: header field 'level' is \"kernel\", but \"layer\" in $D/rank0.jsonl"
out_has "header-mismatch: $D/rank1.jsonl:1: header field 'env' differs from $D/rank0.jsonl (keys: NCCL_ALGO)"

run_dtrace 1 check --json "$D"
json_is violation_counts '{"header-mismatch": 2}'
json_true 'all(v["location"].endswith("rank1.jsonl:1") for v in d["violations"])'
