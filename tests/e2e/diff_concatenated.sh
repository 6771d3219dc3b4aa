#!/bin/bash
# Two rank logs concatenated into one file: trouble naming the second header's line.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/identical

cat "$D/b/rank0.jsonl" "$D/b/rank1.jsonl" >"$WORK/both.jsonl"
[ "$(wc -l <"$D/b/rank0.jsonl")" = 19 ] || fail "fixture changed: rank0.jsonl should have 19 lines"
run_dtrace 2 diff "$D/a" "$WORK/both.jsonl"
trouble_is "$WORK/both.jsonl:20: a second header in one file"
