#!/usr/bin/env bash
# Two identical runs: nothing to bisect, nothing named, exit 1, and nothing run,
# whether bisect takes the step from the last diff or is asked for one: the
# report says there was nothing to bisect, never that a divergence did not
# reproduce.
. "$(dirname "$0")/bisect-lib.sh"
mt --steps 2 --out a
mt --steps 2 --out b
run_dtrace 0 diff a b
run_dtrace 1 bisect --trust --json
json_is verdict '"not-reproduced"'
json_is culprit null
json_is replays '[]'
json_true '"nothing to bisect" in d["reached"]'
run_dtrace 1 bisect --trust --json --step 1 a b
json_is verdict '"not-reproduced"'
json_is culprit null
json_is state null
json_is earlier null
json_is outcomes null
json_is replays '[]'
json_true 'd["reached"].startswith("nothing to bisect: the runs are identical")'
run_dtrace 1 bisect --trust --step 1 a b
out_has "nothing to bisect: the runs are identical"
grep -q "not reproduced\|did not reproduce" "$OUT" && fail "the text report speaks of a divergence that did not reproduce"
echo ok
