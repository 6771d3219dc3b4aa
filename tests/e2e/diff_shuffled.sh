#!/bin/bash
# Per-rank files against one file holding the same records in shuffled line order: identical.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/shuffled

# b/all.jsonl: the header, then both ranks' records and end records shuffled.
run_dtrace 0 diff --json "$D/a" "$D/b"
identical_over 0 2 3 2 30

# The same file named directly (a run may be one .jsonl file), either side.
run_dtrace 0 diff --json "$D/b/all.jsonl" "$D/a"
identical_over 0 2 3 2 30
run_dtrace 0 diff "$D/b/all.jsonl" "$D/b/all.jsonl"
out_has "identical: no divergence over steps 0-2 (3 steps) on 2 ranks, 30 records"
