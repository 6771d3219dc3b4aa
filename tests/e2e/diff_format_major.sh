#!/bin/bash
# A log of an unknown major version (fp/2) is trouble: exit 2 naming the file's header line.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/format_major

run_dtrace 2 diff "$D/a" "$D/b"
trouble_is "$D/b/rank1.jsonl:1: "
err_has "fp/2"
