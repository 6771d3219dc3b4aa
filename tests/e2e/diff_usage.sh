#!/bin/bash
# Usage errors exit 2 with one line saying what is wrong; --help exits 0.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/identical

run_dtrace 2 diff "$D/a"
trouble_is "RUN_B is required (see dtrace --help)"
run_dtrace 2 diff "$D/a" "$D/b" "$D/a"
trouble_is "The following argument was not expected: $D/a (see dtrace --help)"
run_dtrace 2 diff --no-such-option "$D/a" "$D/b"
trouble_is "The following argument was not expected: --no-such-option (see dtrace --help)"
run_dtrace 0 diff --help
out_has "RUN_A"
out_has "--json"
