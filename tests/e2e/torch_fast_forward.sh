#!/usr/bin/env bash
# dtrace_torch under sparse checkpoints (issue 28 point 5): the planted combine
# op in every step, checkpoints every 2 steps. `bisect --step 3` restores
# step 2's checkpoint and fast-forwards step 2, which dtrace_torch records at
# step level (DTRACE_FAST_FORWARD=step, through libdtrace) and which comes out
# otherwise than the run: the verdict is fast-forward at step 2 (exit 1),
# never restore, although the state at step 3 differs.
. "$(dirname "$0")/torch-lib.sh"
ex --steps 4 --nondet combine --run-dir a --checkpoint-dir ca --checkpoint-every 2
ex --steps 4 --nondet combine --run-dir b --checkpoint-dir cb --checkpoint-every 2
run_dtrace 1 bisect --trust --timeout 600 --json --step 3 a b
json_is verdict '"fast-forward"'
json_is departed.step 2
json_is departed.side '"A"'
json_is departed.command '"dtrace bisect --trust --step 2 a b"'
json_is state null
run_dtrace 1 bisect --trust --timeout 600 --step 3 a b
out_has "fast-forward: replaying run A from its checkpoint, step 2 came out otherwise than the run recorded it"
out_lacks "restore: the step-start state differs"
echo ok
