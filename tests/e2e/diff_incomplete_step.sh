#!/bin/bash
# B's last step on rank 0 has no end record: it is excluded (its differing y is not reported) and noted.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/incomplete_step

run_dtrace 0 diff --json "$D/a" "$D/b"
identical_over 0 2 3 2 25
json_true 'any("step 2 incomplete in run B" in n and "(rank 0)" in n for n in d["notes"])'

run_dtrace 0 diff "$D/a" "$D/b"
out_has "step 2 incomplete in run B"
