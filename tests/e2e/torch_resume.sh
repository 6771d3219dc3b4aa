#!/usr/bin/env bash
# The resume switches: an uninterrupted run against one resumed at step 2 from
# its checkpoint with the dropout RNG re-seeded (dropout-rng) or the data order
# reshuffled (data-order) instead of restored. diff finds the step-start state
# differing at step 2, and bisect --trust gives the verdict restore, naming the
# RNG or the data state.
. "$(dirname "$0")/torch-lib.sh"
ex --steps 4 --run-dir a --checkpoint-dir ckpt --checkpoint-every 2
for switch in dropout-rng data-order; do
  case $switch in dropout-rng) want=torch.cpu ;; data-order) want=data.seed ;; esac
  DTRACE_RESUME_AT=2 ex --steps 4 --nondet "$switch" --run-dir "b-$switch" --checkpoint-dir ckpt
  run_dtrace 1 diff --json a "b-$switch"
  json_is first.step 2
  json_is first.io '"state"'
  run_dtrace 0 bisect --trust --timeout 600 --json a "b-$switch"
  json_is verdict '"restore"'
  json_is state "\"$want\""
  json_is culprit null
done
echo ok
