#!/usr/bin/env bash
# At the default size the model learns: over 200 steps the mean loss of the
# last 20 steps is at least 2 nats below the first step's (ln 256 = 5.55).
. "$(dirname "$0")/minitrain-lib.sh"
mt --steps 200 --out run
jq -s '[.[] | select(.op == "loss" and .io == "metric") | .value] as $l
       | {first: $l[0], last: ($l[180:200] | add / length), steps: ($l | length)}' run/rank0.jsonl > loss.json
cat loss.json
[ "$(jq .steps loss.json)" -eq 200 ] || fail "expected 200 loss records"
jq -e '.first > 5.3 and .first < 5.8' loss.json >/dev/null || fail "first loss should be near ln 256"
jq -e '.first - .last >= 2.0' loss.json >/dev/null || fail "loss did not fall by 2 nats in 200 steps"
echo ok
