#!/bin/bash
# A malformed record (seq as a string) is trouble: exit 2 naming the file and line.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/malformed_line

run_dtrace 2 diff --json "$D/a" "$D/b"
trouble_is "$D/b/rank1.jsonl:10: field 'seq' must be an integer"

# The same whichever side the bad run is on.
run_dtrace 2 diff "$D/b" "$D/a"
trouble_is "$D/b/rank1.jsonl:10: "
