#!/usr/bin/env bash
# An uninterrupted run against one resumed from its checkpoint without the RNG
# state: the verdict is restore, naming the RNG state record.
. "$(dirname "$0")/bisect-lib.sh"
mt --steps 4 --checkpoint-every 2 --checkpoint-dir ckpt --out a
mt --steps 4 --checkpoint-dir ckpt --resume --nondet resume-rng --out b
run_dtrace 1 diff --json a b
json_is first.step 2
json_is first.io '"state"'
run_dtrace 0 bisect --trust --json a b
json_is verdict '"restore"'
json_is state "\"$(planted resume-rng state)\""
json_is culprit null
json_is step 2
run_dtrace 0 bisect --trust a b
out_has "restore: the step-start state differs before step 2 runs"
echo ok
