#!/bin/bash
# At one step an origin (rank 1) is the first divergence, before a lower-rank receiver (rank 0).
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/origin_beats_receiver

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is first.step 1
json_is first.rank 1
json_is first.role '"origin"'
json_is first.name '"y"'
json_is ranks.0.rank 0
json_is ranks.0.step 1
json_is ranks.0.role '"receiver"'
json_is ranks.0.op '"all_reduce"'
json_is ranks.1.rank 1
json_is ranks.1.role '"origin"'
json_true 'len(d["ranks"]) == 2'
