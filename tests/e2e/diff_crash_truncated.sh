#!/bin/bash
# B crashed: rank 1's last line is cut short. A note, not an error; that rank's step 3 is incomplete and excluded.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/crash_truncated

run_dtrace 0 diff --json "$D/a" "$D/b"
# rank 0 completed step 3 in both runs, so step 3 is still compared there.
identical_over 0 3 4 2 35
json_true 'any("b/rank1.jsonl:22: last line cut short" in n for n in d["notes"])'
json_true 'any("step 3 incomplete in run B" in n and "(rank 1)" in n for n in d["notes"])'
[ ! -s "$ERR" ] || fail "a truncated line is not an error"
