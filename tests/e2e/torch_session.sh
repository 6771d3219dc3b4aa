#!/usr/bin/env bash
# dtrace_torch serving a replay session by hand (tests/e2e/session-lib.sh, as
# dtrace's runner drives one): two layer-level step replays of step 1 in one
# session give the same records, the same as a launch with the same variables:
# the second starts from the copy of step 1's start the first kept
# (checkpoints.snapshot), not from the state the first left (after its
# optimizer step and its sampler's advance).
. "$(dirname "$0")/torch-lib.sh"
. "$E2E_LIB_DIR/session-lib.sh"
ex --steps 3 --run-dir a --checkpoint-dir ca --checkpoint-every 1
head -n1 a/rank0.jsonl | grep -q '"protocol":"dtrace-replay/1.3"' || fail "dtrace_torch does not announce sessions and pins"
mapfile -t argv < <(head -n1 a/rank0.jsonl | jq -r '.replay.argv[]')
session_repeats_launch 1 1 "${argv[@]}"
# The records compared are the step's own, its restored state included.
grep -q '"io":"state"' "$WORK/s1/rank0.jsonl" || fail "the second request recorded no state"
echo ok
