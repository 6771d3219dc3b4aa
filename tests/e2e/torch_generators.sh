#!/usr/bin/env bash
# Generators nothing reads (issue 28): Python's random and NumPy's generator
# left as imported (--unseeded: seeded by the operating system, different in
# every process) do not make two identical runs diverge, since dtrace_torch
# records their state only for a step that drew from them. A step that draws
# (--python-random: its label smoothing) from a generator that differs between
# the runs still diverges, its state recorded; seeded, the same runs agree; and
# a resume that re-seeds instead of restoring it (--nondet python-rng) is a
# restore naming python.
. "$(dirname "$0")/torch-lib.sh"
has_python_state() { grep -q '"op":"rng","io":"state","name":"python"' "$1/rank0.jsonl"; }

ex --steps 2 --unseeded --run-dir u1
ex --steps 2 --unseeded --run-dir u2
run_dtrace 0 diff u1 u2
! has_python_state u1 || fail "a step that did not draw from Python's random recorded its state"

ex --steps 2 --unseeded --python-random --run-dir d1
ex --steps 2 --unseeded --python-random --run-dir d2
run_dtrace 1 diff --json d1 d2
json_is first.step 0
has_python_state d1 || fail "a step that drew from Python's random did not record its state"

# NumPy's generator, by the recorder alone: recorded at a step that draws from
# it (a single draw moves its position, not its keys), as it was at the step's
# start, and not at steps that leave it alone.
"$PYTHON" - <<'PY' || fail "NumPy's generator"
import json, numpy, torch, dtrace_torch as dt
numpy.random.rand()  # past the refill a fresh generator makes at its first draw
rec = dt.Recorder(torch.nn.Linear(2, 2), run_dir="np")
for step in rec.steps(3):
    with rec.step(step):
        if step == 1:
            numpy.random.rand()
found = [json.loads(line) for line in open("np/rank0.jsonl")]
found = [r for r in found if r.get("op") == "rng" and r.get("name") == "numpy"]
assert [r["step"] for r in found] == [1], found
assert found[0]["io"] == "state" and found[0]["shape"] == [625], found
PY

ex --steps 4 --python-random --run-dir a --checkpoint-dir ckpt --checkpoint-every 2
ex --steps 4 --python-random --run-dir s
run_dtrace 0 diff a s
ex --steps 4 --python-random --nondet python-rng --resume 2 --run-dir b --checkpoint-dir ckpt
run_dtrace 1 diff --json a b
json_is first.step 2
run_dtrace 0 bisect --trust --timeout 600 --json a b
json_is verdict '"restore"'
json_is state '"python"'
json_is culprit null
echo ok
