#!/usr/bin/env bash
# Two identical runs: nothing to bisect, nothing named, exit 1, and nothing run.
. "$(dirname "$0")/bisect-lib.sh"
mt --steps 2 --out a
mt --steps 2 --out b
run_dtrace 0 diff a b
run_dtrace 1 bisect --trust --json
json_is verdict '"not-reproduced"'
json_is culprit null
json_is replays '[]'
json_true '"nothing to bisect" in d["reached"]'
echo ok
