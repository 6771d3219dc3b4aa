#!/bin/bash
# A run whose records are not what its end record's chain digests (a buggy
# recorder, dtrace-fp(5)): rank 0's step 1 loss is changed after the fact, its
# chain kept. check recomputes the chain and reports that step, not trusting it.
. "$(dirname "$0")/lib.sh"
D=$WORK/run
cp -r "$TESTDATA/minitrain/same-a" "$D"
run_dtrace 0 check "$D"
sed -i '149s/"bits":"40b1112d"/"bits":"40b1112e"/' "$D/rank0.jsonl"

run_dtrace 1 check "$D"
out_has "chain-mismatch: $D/rank0.jsonl:"
out_has "rank 0, step 1: end record's chain"

run_dtrace 1 check --json "$D"
json_is violation_counts '{"chain-mismatch": 1}'
json_is violations.0.step 1
