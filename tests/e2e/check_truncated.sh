#!/bin/bash
# A last line cut short by a crash is a note, not a violation: what precedes it is whole.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/truncated

run_dtrace 0 check "$D"
out_has "certified: $D: 2 ranks, steps 0-1 (2 steps), 12 records"
out_has "$D/rank1.jsonl:10: last line cut short"

run_dtrace 0 check --json "$D"
json_is verdict '"certified"'
json_true 'any("rank1.jsonl:10: last line cut short" in n for n in d["notes"])'
