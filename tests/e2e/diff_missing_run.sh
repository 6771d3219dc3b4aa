#!/bin/bash
# A run path that does not exist is trouble: exit 2 naming it.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/identical

run_dtrace 2 diff "$D/a" "$D/does-not-exist"
trouble_is "$D/does-not-exist: no such run"
run_dtrace 2 diff --json "$D/does-not-exist" "$D/a"
trouble_is "$D/does-not-exist: "
