#!/bin/bash
# world_size is 3 but rank 2 wrote nothing: a violation, exit 1.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/rank_absent

run_dtrace 1 check "$D"
out_has "rank-absent: rank 2 of world_size 3 has no records"
out_has "not certified: $D: 1 violation (rank-absent 1)"

run_dtrace 1 check --json "$D"
json_is verdict '"violations"'
json_is violation_counts '{"rank-absent": 1}'
json_is violations.0.kind '"rank-absent"'
json_is violations.0.rank 2
json_is violations.0.location null
