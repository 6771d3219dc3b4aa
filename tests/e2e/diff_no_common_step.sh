#!/bin/bash
# Runs without a complete step in common cannot be compared: exit 2.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/no_common_step

run_dtrace 2 diff --json "$D/a" "$D/b"
trouble_is "runs cannot be compared"
err_has "no complete step in common"
