#!/bin/bash
# Runs fingerprinted with different hash algorithms cannot be compared: exit 2.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/hash_algorithms

run_dtrace 2 diff --json "$D/a" "$D/b"
trouble_is "runs cannot be compared"
err_has '"xxh3-64k/1"'
err_has '"sha256/1"'
