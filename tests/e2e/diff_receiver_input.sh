#!/bin/bash
# An op input differing first makes the rank a receiver.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/receiver_input

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is first.step 2
json_is first.rank 0
json_is first.seq 0
json_is first.io '"in"'
json_is first.name '"x"'
json_is first.kind '"value"'
json_is first.role '"receiver"'
json_true 'len(d["ranks"]) == 1'
