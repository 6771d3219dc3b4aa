#!/usr/bin/env bash
# dtrace record counts the optimizer's steps (issue 39, proof). With gradient
# accumulation (plain_lm.py --grad-accum 2: two forwards and backwards per
# optimizer step) a step is the optimizer's: show counts --steps steps, each
# with two occurrences of the batch and of the loss, and bisect --trust names
# the planted combine in fwd/blocks.0.moe in the first micro-batch. With an LR
# scheduler stepped after each optimizer step and a shuffled DataLoader
# (--lr-schedule --loader) the steps are the optimizer's too, identical runs
# diff identical, and a replay of step 2, which runs steps 0 and 1 again from
# the program's start, reproduces them (bisect checks each against the run:
# no fast-forward, no data note); planted, the cause is named as without them.
. "$(dirname "$0")/record-torch-lib.sh"

plain a --steps 3 --grad-accum 2 --nondet combine
plain b --steps 3 --grad-accum 2 --nondet combine
run_dtrace 0 show --json a
json_is ranks.0.step_count 3
"$PYTHON" - <<'PY' || fail "the micro-batches of an accumulated step"
import collections, json
count = collections.Counter()
for line in open("a/rank0.jsonl"):
    r = json.loads(line)
    if r.get("scope") == "step" and r.get("op") in ("batch", "loss"):
        count[(r["step"], r["op"], r["name"])] += 1
for step in range(3):
    for key in ((step, "batch", "batch.0"), (step, "batch", "batch.1"), (step, "loss", "loss")):
        assert count[key] == 2, (key, count[key])
PY
run_dtrace 1 diff --json a b
json_is first.step 0
bisect_into accum.json a b
json_is verdict '"named"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"fwd/blocks.0.moe"'
json_is culprit.occurrence 0

plain s1 --steps 3 --lr-schedule --loader
plain s2 --steps 3 --lr-schedule --loader
run_dtrace 0 show --json s1
json_is ranks.0.step_count 3
run_dtrace 0 diff s1 s2
run_dtrace 1 bisect --trust --repeat 1 --step 2 --rank 0 --json s1 s2
json_is verdict '"not-reproduced"'
json_true 'd["replays"] and all(r["exit"] == 0 for r in d["replays"])'
json_true 'not [n for n in d["notes"] if n.startswith(("data:", "fast-forward"))]'

plain n1 --steps 3 --lr-schedule --loader --nondet embed-bwd
plain n2 --steps 3 --lr-schedule --loader --nondet embed-bwd
bisect_into schedule.json n1 n2
json_is verdict '"named"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"bwd/embed"'
echo ok
