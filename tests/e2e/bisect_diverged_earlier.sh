#!/usr/bin/env bash
# `bisect --step N` three steps after the runs first diverged (issue 12): each
# replay starts from its own run's checkpointed state, so nothing was restored
# wrongly. With one configuration (chaos unpinned: config and env equal) bisect
# says where the runs first differ and still names the planted kernel at step 3
# by repeating A's step; with two configurations (chaos seeds pinned 1 and 2)
# the verdict is diverged-earlier, exit 1, carrying step 0.
. "$(dirname "$0")/bisect-lib.sh"
op=$(planted splitk op)
scope=$(planted splitk scope)

mt --steps 5 --level step --nondet splitk --checkpoint-every 1 --checkpoint-dir ck-a --out a
mt --steps 5 --level step --nondet splitk --checkpoint-every 1 --checkpoint-dir ck-b --out b
run_dtrace 1 diff --json a b
json_is first.step 0
run_dtrace 0 bisect --trust --json --step 3 a b
json_is verdict '"named"'
json_is step 3
json_is shared_configuration true
json_is culprit.op "\"$op\""
json_is culprit.scope "\"$scope\""
json_is earlier.step 0
json_is earlier.command '"dtrace bisect --trust --step 0 a b"'
json_is state null
# After the restore check (one replay per side), every replay is of A.
json_true '[r["side"] for r in d["replays"][:2]] == ["A", "B"]'
json_true 'all(r["side"] == "A" for r in d["replays"][2:]) and len(d["replays"]) > 2'
err_has "the runs diverged before step 3"
err_has "bisect there: dtrace bisect --trust --step 0 a b"
run_dtrace 0 bisect --trust --step 3 a b
out_has "named: $scope $op"
out_has "earlier:  the runs diverged before step 3: their records first differ at step 0"
out_lacks "restore:"

mt --steps 5 --level step --nondet splitk --chaos-seed 1 --checkpoint-every 1 --checkpoint-dir ck-c --out c
mt --steps 5 --level step --nondet splitk --chaos-seed 2 --checkpoint-every 1 --checkpoint-dir ck-d --out d
run_dtrace 1 diff --json c d
json_is first.step 0
run_dtrace 1 bisect --trust --json --step 3 c d
json_is verdict '"diverged-earlier"'
json_is shared_configuration false
json_is culprit null
json_is state null
json_is earlier.step 0
json_is earlier.rank 0
json_is earlier.command '"dtrace bisect --trust --step 0 c d"'
json_true 'len(d["replays"]) == 2'
run_dtrace 1 bisect --trust --step 3 c d
out_has "diverged-earlier: the runs' records already differ at step 0, before step 3"
out_has "bisect there: dtrace bisect --trust --step 0 c d"
out_lacks "restore:"
# And bisecting where it says names the kernel.
run_dtrace 0 bisect --trust --json --step 0 c d
json_is verdict '"named"'
json_is culprit.op "\"$op\""
json_is earlier null
echo ok
