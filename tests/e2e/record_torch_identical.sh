#!/usr/bin/env bash
# dtrace record on an unmodified program (issue 39, proof): plain_lm.py imports
# nothing of dtrace (checked with the dtrace packages importable), and two runs
# of it recorded by `dtrace record --out DIR -- python plain_lm.py ...` are
# identical: diff exits 0 over every step. The steps are the optimizer's (show
# counts --steps), each with what the explicit Recorder records at step level
# (parameters, optimizer state, generators, the batch as the model's forward
# inputs, the loss, the gradients); check certifies the runs, and watch, which
# ends at the rank's end marker, agrees with diff. A run whose data order
# differs (--data-seed), with gpt_moe.py's sampler and with a shuffled
# DataLoader seeded by the program (--loader), differs first in its batch, and
# bisect's verdict is data, read from the logs (no replay).
. "$(dirname "$0")/record-torch-lib.sh"

# No line of dtrace in what runs: plain_lm.py (and gpt_moe.py's module, which
# it imports) run with the packages on PYTHONPATH and load none of them.
"$PYTHON" - "$PLAIN" <<'PY' || fail "plain_lm.py imports dtrace"
import runpy, sys
path = sys.argv[1]
sys.argv = [path, "--steps", "1"]
try:
    runpy.run_path(path, run_name="__main__")
except SystemExit as e:
    assert not e.code, e.code
loaded = sorted(m for m in sys.modules if m.split(".")[0] in ("dtrace", "dtrace_torch"))
assert not loaded, loaded
PY

plain a --steps 3
plain b --steps 3
grep -q "step 2 loss" "$WORK/record-a.err" || fail "the program's own output did not pass through dtrace record"
grep -qF "dtrace diff" "$WORK/record-a.err" || fail "dtrace record's summary names no next command"
run_dtrace 0 diff --json a b
json_is verdict '"identical"'
json_is compared.step_count 3
run_dtrace 0 show --json a
json_is complete true
json_is ranks.0.step_count 3
json_is ranks.0.steps '"0-2"'
"$PYTHON" - <<'PY' || fail "what dtrace record recorded of a step"
import collections, json
ops = collections.defaultdict(set)
for line in open("a/rank0.jsonl"):
    r = json.loads(line)
    if "scope" in r:
        ops[r["step"]].add((r["scope"], r["op"], r["io"]))
assert sorted(ops) == [0, 1, 2], sorted(ops)
for step in (1, 2):  # AdamW has state from its first step on
    want = {("step", "param", "state"), ("step", "optim", "state"), ("step", "rng", "state"),
            ("step", "batch", "in"), ("step", "loss", "metric"), ("step", "grads", "out")}
    assert want <= ops[step], (step, sorted(want - ops[step]))
batch = [json.loads(l) for l in open("a/rank0.jsonl") if '"op":"batch"' in l]
# The model's forward is model(x, y): both are what the step consumed.
assert sorted(r["name"] for r in batch if r["step"] == 0) == ["batch.0", "batch.1"], batch
PY
grep -q "^exit 0" a/rank0.status 2>/dev/null || fail "no end marker a/rank0.status"
run_dtrace 0 check a
run_dtrace 0 watch a --against b

# The data order changed, nothing else: the first difference is the batch.
plain c --steps 3 --data-seed 7
run_dtrace 1 diff --json a c
json_is first.step 0
json_is first.op '"batch"'
run_dtrace 0 bisect --trust --json a c
json_is verdict '"data"'
json_is input.op '"batch"'
json_is replays '[]'

# The same with a shuffled DataLoader whose order the program seeds.
plain la --steps 3 --loader
plain lb --steps 3 --loader
run_dtrace 1 diff a la  # the loader's order is not the sampler's
run_dtrace 0 diff la lb
plain lc --steps 3 --loader --data-seed 7
run_dtrace 0 bisect --trust --json la lc
json_is verdict '"data"'
json_is step 0

# A program with its own Recorder (gpt_moe.py) under dtrace record is recorded
# once, by its own recorder: one rank file in dtrace record's directory (its
# run_dir replaced, as DTRACE_RUN_DIR does), its own header config, and the
# replay command dtrace record's, which a replay takes through dtrace record
# to that recorder.
for r in ea eb; do
  record "$r" "$PYTHON" "$EXAMPLE" --steps 2 --run-dir "elsewhere-$r" --checkpoint-dir "ck-$r"
done
[ ! -e elsewhere-ea ] || fail "the program's own run_dir was written under dtrace record"
[ "$(ls ea)" = "$(printf 'rank0.jsonl\nrank0.status')" ] || fail "ea holds $(ls ea)"
"$PYTHON" - "$DTRACE" <<'PY' || fail "the explicit Recorder's header under dtrace record"
import json, os, sys
header = json.loads(open("ea/rank0.jsonl").readline())
assert header["config"].get("example") == "gpt_moe" and "recorded_by" not in header["config"], header["config"]
assert header["replay"]["argv"][:3] == [os.path.realpath(sys.argv[1]), "record", "--"], header["replay"]
PY
run_dtrace 0 diff ea eb
echo ok
