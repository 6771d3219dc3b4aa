#!/bin/bash
# Both files agree on hash "sha256/1", which dtrace cannot recompute.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/unknown_hash

run_dtrace 1 check "$D"
out_has "unknown-hash: $D/rank0.jsonl:1: hash algorithm \"sha256/1\""

run_dtrace 1 check --json "$D"
json_is violation_counts '{"unknown-hash": 1}'
json_is hash '"sha256/1"'
