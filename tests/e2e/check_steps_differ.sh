#!/bin/bash
# Rank 1 stopped after step 1 while rank 0 went on to step 3: the missing steps are named per rank.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/steps_differ

run_dtrace 1 check "$D"
out_has "steps-differ: rank 1 lacks 2 steps (2-3) that other ranks have"

run_dtrace 1 check --json "$D"
json_is violation_counts '{"steps-differ": 1}'
json_is violations.0.rank 1
json_is violations.0.step 2
json_is steps '"0-3"'
