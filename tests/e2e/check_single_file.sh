#!/bin/bash
# One .jsonl file holding both ranks, their lines interleaved, is a run like any other.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/single_file/run.jsonl

run_dtrace 0 check --json "$D"
json_is verdict '"certified"'
json_is ranks 2
json_is records 12
json_is files "[\"$D\"]"
