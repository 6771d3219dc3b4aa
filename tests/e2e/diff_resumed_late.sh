#!/bin/bash
# B resumed at step 3: steps 0-2 exist only in A and are named in a note, not mismatches.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/resumed_late

run_dtrace 0 diff --json "$D/a" "$D/b"
identical_over 3 5 3 2 30
json_true 'any("steps 0-2 only in run A" in n for n in d["notes"])'
json_true 'not any("run B" in n for n in d["notes"])'

# The other way round the steps are only in run B.
run_dtrace 0 diff --json "$D/b" "$D/a"
json_is compared.steps '[3, 5]'
json_true 'any("steps 0-2 only in run B" in n for n in d["notes"])'

run_dtrace 0 diff "$D/a" "$D/b"
out_has "steps 0-2 only in run A, not compared (ranks 0-1)"
