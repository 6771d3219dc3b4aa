#!/bin/bash
# Two identical runs: exit 0, verdict identical, every step and record compared.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/identical

run_dtrace 0 diff --json "$D/a" "$D/b"
identical_over 0 2 3 2 30
json_is notes '[]'
json_is header_differences '[]'

run_dtrace 0 diff "$D/a" "$D/b"
out_has "identical: no divergence over steps 0-2 (3 steps) on 2 ranks, 30 records"
out_lacks "diverged"

# A run compared with itself: the same path twice, as a directory and as one file.
run_dtrace 0 diff "$D/a" "$D/a"
out_has "identical: no divergence over steps 0-2 (3 steps) on 2 ranks, 30 records"
run_dtrace 0 diff "$D/a/rank0.jsonl" "$D/a/rank0.jsonl"
out_has "identical: no divergence over steps 0-2 (3 steps) on 1 rank, 15 records"

# Two runs given as one file each (rank 0 of a and of b): runs need not be directories.
run_dtrace 0 diff --json "$D/a/rank0.jsonl" "$D/b/rank0.jsonl"
identical_over 0 2 3 1 15
