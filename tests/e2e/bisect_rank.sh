#!/usr/bin/env bash
# `bisect --step N --rank R` on a rank other than 0 (issue 17): four ranks with
# the split-K switch, chaos pinned apart, diverge on every rank at step 0; diff
# names rank 0, and bisect follows rank 2 when asked, to the planted kernel.
. "$(dirname "$0")/bisect-lib.sh"
mt --steps 2 --ranks 4 --level step --nondet splitk --chaos-seed 1 --out a
mt --steps 2 --ranks 4 --level step --nondet splitk --chaos-seed 2 --out b
run_dtrace 1 diff --json a b
json_is first.rank 0
json_true 'any(r["rank"] == 2 and r["step"] == 0 for r in d["ranks"])'
run_dtrace 0 bisect --trust --json --step 0 --rank 2 a b
json_is verdict '"named"'
json_is rank 2
json_is culprit.rank 2
json_is culprit.step 0
json_is culprit.op "\"$(planted splitk op)\""
json_is culprit.scope "\"$(planted splitk scope)\""
json_is ranks_replayed '[0, 1, 2, 3]'
json_true 'not any("following rank" in n for n in d["notes"])'
json_true 'd["evidence"]["distinct_outputs"] >= 2'
run_dtrace 0 bisect --trust --step 0 --rank 2 a b
out_has "step 0, rank 2 (replays ran ranks 0-3)"
echo ok
