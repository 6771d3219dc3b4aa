#!/usr/bin/env bash
# An uninterrupted run against one resumed from its checkpoint without the RNG
# state, on 1 rank and on 4, recorded at step level: the verdict is restore,
# naming the RNG state record by scope, op and name (the record diff names).
. "$(dirname "$0")/bisect-lib.sh"
for ranks in 1 4; do
  mkdir -p "r$ranks" && cd "r$ranks" || fail "cd r$ranks"
  mt --steps 4 --ranks "$ranks" --level step --checkpoint-every 2 --checkpoint-dir ckpt --out a
  mt --steps 4 --ranks "$ranks" --level step --checkpoint-dir ckpt --resume --nondet resume-rng --out b
  run_dtrace 1 diff --json a b
  json_is first.step 2
  json_is first.io '"state"'
  record=$(python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["first"]; print(f["scope"], f["op"], f["name"])' "$OUT")
  run_dtrace 0 bisect --trust --json a b
  json_is verdict '"restore"'
  json_is state "\"$(planted resume-rng state)\""
  json_true "' '.join([d['state_scope'], d['state_op'], d['state']]) == '$record'"
  json_is culprit null
  json_is step 2
  [ "$ranks" = 1 ] || json_is ranks_replayed '[0, 1, 2, 3]'
  run_dtrace 0 bisect --trust a b
  out_has "restore: the step-start state differs before step 2 runs: $record"
  cd "$WORK" || fail "cd $WORK"
done
echo ok
