#!/usr/bin/env bash
# Two identical runs: nothing to bisect, nothing named, exit 1, and nothing run.
# Asked for a step all the same, the replays agree: not-reproduced, neither a
# restore nor an earlier divergence, and no per-process search (the runs agree).
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
json_true 'len(d["replays"]) == 6 and all(r["stage"] == "layer" for r in d["replays"])'
echo ok
