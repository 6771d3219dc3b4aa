#!/bin/bash
# A record present in A only (rank 0, step 1, y) is a structure mismatch; B's later records still align by identity.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/missing_record

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is first.step 1
json_is first.rank 0
json_is first.seq 1
json_is first.op '"gemm_fc1"'
json_is first.io '"out"'
json_is first.name '"y"'
json_is first.kind '"structure"'
json_is first.b null
json_is first.b_location null
json_is first.a.hash '"5eed000000010001"'
json_true 'd["first"]["a_location"].endswith("/a/rank0.jsonl:9")'
json_true '"A only" in d["first"]["detail"]'
json_true 'len(d["ranks"]) == 1'

run_dtrace 1 diff "$D/a" "$D/b"
out_has "structure: recorded in A only"
