#!/bin/bash
# Usage errors exit 2; --help exits 0.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/identical

run_dtrace 2 diff "$D/a"
run_dtrace 2 diff "$D/a" "$D/b" "$D/a"
run_dtrace 2 diff --no-such-option "$D/a" "$D/b"
run_dtrace 0 diff --help
out_has "RUN_A"
out_has "--json"
