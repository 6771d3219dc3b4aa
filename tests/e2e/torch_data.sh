#!/usr/bin/env bash
# The data, not a kernel (issue 28): the sampler left out of the Recorder's
# state= (--nondet data-unsaved on both runs) is neither checkpointed nor
# recorded, so the run resumed at step 2 (--resume 2, the Recorder's resume_at)
# consumes the data from the start. Each step records its batch (rec.step(step,
# batch=...)): diff's first difference is that record, and bisect's verdict is
# data, naming it, read from the logs (exit 0, no replay). Without the batch
# record diff said step 2 grads and bisect not-reproduced: its replays each
# restored the same wrong data and agreed. Then two identical runs bisected at
# step 2: the replays, restored without the sampler, consume other data than
# the runs did, which a note says. The sampler in state= but reshuffled on
# resume (data-order) is a restore of data.seed (tests/e2e/torch_resume.sh).
. "$(dirname "$0")/torch-lib.sh"
ex --steps 4 --nondet data-unsaved --run-dir a --checkpoint-dir ckpt --checkpoint-every 2
ex --steps 4 --nondet data-unsaved --resume 2 --run-dir b --checkpoint-dir ckpt
run_dtrace 1 diff --json a b
json_is first.step 2
json_is first.scope '"step"'
json_is first.op '"batch"'
json_is first.io '"in"'
json_is first.name '"batch.0"'
run_dtrace 1 diff a b
out_has "what the step consumed, its data, differs: not a kernel"
run_dtrace 0 bisect --trust --timeout 600 --json a b
json_is verdict '"data"'
json_is input '{"scope": "step", "op": "batch", "name": "batch.0", "occurrence": 0}'
json_is culprit null
json_is state null
json_is replays '[]'
run_dtrace 0 bisect --trust a b
out_has "data: the inputs of step 2 differ: step batch in batch.0"
out_has "not a kernel"
run_dtrace 0 bisect --trust --html report.html a b
grep -qF '<p class="verdict">data: step batch in batch.0' report.html || fail "the HTML verdict lacks the record"
grep -qF 'what the step consumed differs: step batch in batch.0' report.html || fail "the HTML ladder lacks the data"

# rec.batch by the recorder alone: a dict's tensors by key (other leaves left
# out), then two micro-batches, each call the next occurrence of its names.
"$PYTHON" - <<'PY' || fail "rec.batch"
import json, torch, dtrace_torch as dt
rec = dt.Recorder(torch.nn.Linear(2, 2), run_dir="micro")
for step in rec.steps(1):
    with rec.step(step, batch={"ids": torch.arange(4), "mask": torch.ones(4, dtype=torch.bool), "n": 3}):
        rec.batch((torch.zeros(2), torch.ones(2)))
        rec.batch((torch.zeros(2), torch.ones(3)))
batch = [r for r in map(json.loads, open("micro/rank0.jsonl")) if r.get("op") == "batch"]
assert all(r["scope"] == "step" and r["io"] == "in" for r in batch), batch
got = [(r["name"], r["shape"]) for r in batch]
assert got == [("batch.ids", [4]), ("batch.mask", [4]), ("batch.0", [2]), ("batch.1", [2]),
               ("batch.0", [2]), ("batch.1", [3])], got
PY

# Identical runs: nothing differs at step 2, but a replay restores no sampler.
# Without --rank, bisect reads the runs, finds them identical and replays
# nothing; with it, it replays the step and says the replay's data differ.
ex --steps 4 --nondet data-unsaved --run-dir c --checkpoint-dir ckpt-c --checkpoint-every 2
run_dtrace 0 diff a c
run_dtrace 1 bisect --trust --repeat 1 --step 2 --json a c
json_is verdict '"not-reproduced"'
json_true 'd["replays"] == [] and d["reached"].startswith("nothing to bisect")'
run_dtrace 1 bisect --trust --repeat 1 --step 2 --rank 0 --json a c
json_is verdict '"not-reproduced"'
json_is input null
python3 - "$OUT" <<'PY' || fail "bisect's notes lack the replay's data"
import json, sys
notes = json.load(open(sys.argv[1]))["notes"]
want = "data: replaying run A at step 2 does not feed the step what the run consumed there (step batch in batch.0)"
sys.exit(0 if any(n.startswith(want) for n in notes) else f"notes: {notes}")
PY
echo ok
