#!/bin/bash
# A malformed line, files disagreeing on world_size, and a missing run are trouble: exit 2, one line naming where.
. "$(dirname "$0")/lib.sh"

D=$TESTDATA/check/malformed
run_dtrace 2 check "$D"
trouble_is "$D/rank1.jsonl:3: "
run_dtrace 2 check --json "$D"
trouble_is "$D/rank1.jsonl:3: "

D=$TESTDATA/check/world_size_mismatch
run_dtrace 2 check "$D"
trouble_is "$D/rank1.jsonl:1: world_size 4 disagrees with $D/rank0.jsonl (2)"

run_dtrace 2 check "$TESTDATA/check/no_such_run"
trouble_is "$TESTDATA/check/no_such_run: no such run"
