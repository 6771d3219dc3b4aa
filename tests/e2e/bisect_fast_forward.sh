#!/usr/bin/env bash
# Checkpoints every 2 steps and a planted nondeterministic kernel (issue 28
# point 5): `bisect --step 3` restores step 2's checkpoint and fast-forwards
# step 2, which comes out otherwise than the run recorded it. The checkpoint
# was complete: the verdict is fast-forward (exit 1), naming step 2 and the
# bisect to run there, never restore. Bisecting there names the kernel.
. "$(dirname "$0")/bisect-lib.sh"
op=$(planted splitk op)

mt --steps 5 --level step --nondet splitk --checkpoint-every 2 --checkpoint-dir ck-a --out a
mt --steps 5 --level step --nondet splitk --checkpoint-every 2 --checkpoint-dir ck-b --out b
run_dtrace 1 bisect --trust --json --step 3 a b
json_is verdict '"fast-forward"'
json_is step 3
json_is departed.step 2
json_is departed.rank 0
json_is departed.side '"A"'
json_is departed.command '"dtrace bisect --trust --step 2 a b"'
json_true 'd["departed"]["record"].startswith("step ")'
json_is state null
json_is culprit null
# Every step replay asked for its fast-forwarded steps, and only the restore
# check's replays ran.
json_true 'all(r["env"].get("DTRACE_FAST_FORWARD") == "step" for r in d["replays"])'
json_true 'len(d["replays"]) == 2'
run_dtrace 1 bisect --trust --step 3 a b
out_has "fast-forward: replaying run A from its checkpoint, step 2 came out otherwise than the run recorded it"
out_has "bisect there: dtrace bisect --trust --step 2 a b"
out_lacks "restore: the step-start state differs"
err_has "restored step 2 and fast-forwarded"

# From a checkpoint 3 steps back (step 0, every 4): of the three steps
# fast-forwarded, the earliest that departed is named.
mt --steps 5 --level step --nondet splitk --checkpoint-every 4 --checkpoint-dir ck-c --out c
mt --steps 5 --level step --nondet splitk --checkpoint-every 4 --checkpoint-dir ck-d --out d
run_dtrace 1 bisect --trust --json --step 3 c d
json_is verdict '"fast-forward"'
json_is departed.step 0
json_is departed.command '"dtrace bisect --trust --step 0 c d"'
json_true '"restored step 0 and fast-forwarded, and step 0 came out otherwise" in d["reached"]'

# A replay from a checkpoint at the step itself fast-forwards nothing.
run_dtrace 0 bisect --trust --json --step 2 a b
json_is verdict '"named"'
json_is culprit.op "\"$op\""
json_is departed null
echo ok
