#!/bin/bash
# Unknown fields in the header, records and end records are ignored: identical.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/unknown_fields

run_dtrace 0 diff --json "$D/a" "$D/b"
identical_over 0 2 3 2 30
run_dtrace 0 diff --json "$D/b" "$D/a"
identical_over 0 2 3 2 30
