#!/usr/bin/env bash
# dtrace verify --resume-at certifies the example: the run stopped at step 2
# (DTRACE_STOP_AT) and resumed there (DTRACE_RESUME_AT) matches the uninterrupted
# one bit for bit; the control, resumed without its dropout RNG, must diverge.
. "$(dirname "$0")/torch-lib.sh"
run_dtrace 0 verify --resume-at 2 --json \
  --control "$PYTHON $EXAMPLE --steps 4 --nondet dropout-rng --run-dir r --checkpoint-dir c" \
  -- "$PYTHON" "$EXAMPLE" --steps 4 --run-dir r --checkpoint-dir c
json_is certified true
json_is guarantee '"checkpoint-resume"'
json_is control.verdict '"diverged"'
[ ! -e r ] && [ ! -e c ] || fail "verify's arms wrote the workload's own run or checkpoint directory"
echo ok
