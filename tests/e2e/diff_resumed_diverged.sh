#!/bin/bash
# B resumed at step 3 and diverges at step 4: the divergence is found, the steps only in A are noted.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/resumed_diverged

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is verdict '"diverged"'
json_is first.step 4
json_is first.rank 0
json_is first.role '"origin"'
json_is first.name '"y"'
json_true 'd["first"]["a_location"].endswith("/a/rank0.jsonl:27")'
json_true 'd["first"]["b_location"].endswith("/b/rank0.jsonl:9")'
json_is ranks.1.rank 1
json_is ranks.1.role '"receiver"'
json_is compared.steps '[3, 5]'
json_true 'any("steps 0-2 only in run A" in n for n in d["notes"])'
