#!/usr/bin/env bash
# A generator nobody seeded, in a NumPy program on the dtrace package (issue
# 38): examples/numpy/numpytrain.py --dropout draws its dropout mask from a
# generator and records the generator's state as the layer's `in` record rng.
# Two fresh runs whose generator differs differ first there, every record
# before it matching: dtrace diff calls that unknown and names the generator
# (it said "receiver (an input already differed)"), and dtrace bisect gives the
# verdict generator, exit 0, with the record and the advice (it said
# not-localized for the layer's own generator, and "an incomplete restore" for
# NumPy's global one, where nothing was restored). Seeded and in the state, the
# same runs agree. In suite 'launches' too (every bisect with --launches).
. "$(dirname "$0")/python-lib.sh"
need_python_module numpy "tools/setup-deps.sh installs Debian's python3-numpy"
EXAMPLE="$SOURCE_ROOT/examples/numpy/numpytrain.py"

nt() { "$PYTHON" "$EXAMPLE" "$@" >/dev/null 2>"$WORK/example.err" || { cat "$WORK/example.err" >&2; fail "numpytrain.py $*"; }; }

# replays_ran: every replay of the last bisect exited 0, the way asked
# (sessions, or one launch per replay under E2E_REPLAYS=launches).
replays_ran() {
  json_true 'len(d["replays"]) >= 2 and all(r["exit"] == 0 for r in d["replays"])'
  if [ "${E2E_REPLAYS:-}" = launches ]; then
    json_is replay_mode '"launches"'
  else
    json_is replay_mode '"sessions"'
  fi
}

# The right way: the layer's own generator seeded, in the state as op rng.
nt --run-dir s1 --checkpoint-dir cs1 --steps 2 --level layer --dropout seeded
nt --run-dir s2 --checkpoint-dir cs2 --steps 2 --level layer --dropout seeded
run_dtrace 0 diff s1 s2
grep -q '"scope":"fwd/dropout","op":"dropout","io":"in","name":"rng"' s1/rank0.jsonl ||
  fail "the dropout layer did not record its generator as in rng"
grep -q '"op":"rng","io":"state","name":"rng.state.state"' s1/rank0.jsonl ||
  fail "the seeded generator is not in the state records"

# Its own generator, seeded by the operating system and not in the state.
nt --run-dir u1 --checkpoint-dir cu1 --steps 2 --level layer --dropout unseeded
nt --run-dir u2 --checkpoint-dir cu2 --steps 2 --level layer --dropout unseeded
run_dtrace 1 diff --json u1 u2
json_is first.step 0
json_is first.scope '"fwd/dropout"'
json_is first.io '"in"'
json_is first.name '"rng"'
json_is first.role '"unknown"'
json_is first.generator '{"scope": "fwd/dropout", "op": "dropout", "io": "in", "name": "rng"}'
run_dtrace 1 diff u1 u2
out_has "role:    unknown (a generator's state differs while every record before it matches: not an op of the step;"
out_has "seed it and put it in the program's state"
out_lacks "receiver"
run_dtrace 0 bisect --trust --json u1 u2
json_is verdict '"generator"'
json_is generator '{"scope": "fwd/dropout", "op": "dropout", "io": "in", "name": "rng", "first_step": true}'
json_is culprit null
json_is state null
json_true 'd["reached"].startswith("layer pass: the replays of step 0 first differ at fwd/dropout dropout in rng")'
json_true '"nothing was restored" in d["reached"] and "not seeded alike" in d["reached"]'
replays_ran
run_dtrace 0 bisect --trust u1 u2
out_has "generator: the state of a generator step 0 draws from differs: fwd/dropout dropout in rng"
out_has "advice:   seed it from the configuration, and put it in the program's state"
out_lacks "receiver"
out_lacks "not localized"

# NumPy's global generator, which the program never seeds: recorded at the
# end of the step that drew from it (step rng numpy), and checkpointed, so
# each replay restores its own run's; the runs began step 0 apart.
nt --run-dir g1 --checkpoint-dir cg1 --steps 2 --level layer --dropout global
nt --run-dir g2 --checkpoint-dir cg2 --steps 2 --level layer --dropout global
run_dtrace 1 diff --json g1 g2
json_is first.name '"rng"'
json_is first.role '"unknown"'
json_is first.generator.name '"rng"'
# At step level the draw shows first in what it computed (the loss), its
# generator recorded at the step's end.
nt --run-dir h1 --checkpoint-dir ch1 --steps 2 --dropout global
nt --run-dir h2 --checkpoint-dir ch2 --steps 2 --dropout global
run_dtrace 1 diff --json h1 h2
json_is first.role '"unknown"'
json_is first.generator '{"scope": "step", "op": "rng", "io": "state", "name": "numpy"}'
for runs in "g1 g2" "h1 h2"; do
  # shellcheck disable=SC2086
  run_dtrace 0 bisect --trust --json $runs
  json_is verdict '"generator"'
  json_is generator '{"scope": "step", "op": "rng", "io": "state", "name": "numpy", "first_step": true}'
  json_is state null
  json_true '"incomplete restore" not in d["reached"] and "nothing was restored" in d["reached"]'
  replays_ran
done
run_dtrace 0 bisect --trust g1 g2
out_has "generator: the state of a generator step 0 draws from differs: step rng state numpy"
out_lacks "incomplete restore"

# A post-mortem script reads it as a cause named (exit 0), with its record.
# Debian's python3, where dtrace runs (as e2e/python_postmortem): the torch 2
# pass's $PYTHON is a Debian 13 root, where the host-built dtrace has none of
# its libraries.
/usr/bin/python3 - "$DTRACE" <<'PY' || fail "postmortem on the generator verdict"
import sys
from dtrace import postmortem
b = postmortem.bisect("u1", "u2", trust=True, dtrace=sys.argv[1])
assert b.verdict == "generator" and b.named and b.exit_status == 0, b
assert b.generator.name == "rng" and b.generator.first_step, b.generator
d = postmortem.diff("u1", "u2", dtrace=sys.argv[1])
assert d.first.role == "unknown" and d.first.generator.scope == "fwd/dropout", d.first
PY
echo ok
