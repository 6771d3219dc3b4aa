#!/bin/bash
# `dtrace show` on a malformed run or a missing one: exit 2, one line naming the file and line.
. "$(dirname "$0")/lib.sh"

D=$TESTDATA/check/malformed
run_dtrace 2 show "$D"
trouble_is "$D/rank1.jsonl:3: "

run_dtrace 2 show --json "$TESTDATA/check/no_such_run"
trouble_is "$TESTDATA/check/no_such_run: no such run"

run_dtrace 2 show "$TESTDATA/check/clean" --step notanumber
trouble_is "--step: 'notanumber' is not a step (an integer from 0 to 9223372036854775807)"
