#!/bin/bash
# Runs of different world sizes cannot be compared: exit 2.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/world_sizes

run_dtrace 2 diff "$D/a" "$D/b"
trouble_is "runs cannot be compared"
err_has "world_size 2"
err_has "has 4"
