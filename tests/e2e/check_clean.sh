#!/bin/bash
# A whole run (two ranks, steps 0-2, every step ended with the right count) is certified in one line.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/clean

run_dtrace 0 check "$D"
[ "$(wc -l <"$OUT")" = 1 ] || fail "a certificate is one line"
out_has "certified: $D: 2 ranks, steps 0-2 (3 steps), 18 records"
[ ! -s "$ERR" ] || fail "nothing on stderr"

run_dtrace 0 check --json "$D"
json_is verdict '"certified"'
json_is ranks 2
json_is world_size 2
json_is hash '"xxh3-64k/1"'
json_is steps '"0-2"'
json_is step_range '[0, 2]'
json_is step_count 3
json_is records 18
json_is violations '[]'
json_is violation_total 0
