#!/usr/bin/env bash
# A generator nobody seeded, in a PyTorch program (issue 38): the example with
# --unseeded --python-random leaves Python's random as imported (seeded by the
# operating system) and draws each step's label smoothing from it. Two fresh
# runs differ from that draw; dtrace_torch records the generator at the end of
# the step (step rng python). dtrace diff names the generator beside the first
# difference (role unknown where no input differed before it), and dtrace
# bisect gives the verdict generator, exit 0: step 0 is where both runs begin,
# nothing was restored (it said "restore ... an incomplete restore"). In suite
# 'launches' too (every bisect with --launches).
. "$(dirname "$0")/torch-lib.sh"

ex --steps 2 --unseeded --python-random --run-dir a --checkpoint-dir ca
ex --steps 2 --unseeded --python-random --run-dir b --checkpoint-dir cb
run_dtrace 1 diff --json a b
json_is first.step 0
json_is first.role '"unknown"'
json_is first.generator '{"scope": "step", "op": "rng", "io": "state", "name": "python"}'
run_dtrace 1 diff a b
out_has "the step drew from a generator whose state differs (step rng state python)"

run_dtrace 0 bisect --trust --json a b
json_is verdict '"generator"'
json_is generator '{"scope": "step", "op": "rng", "io": "state", "name": "python", "first_step": true}'
json_is state null
json_is culprit null
json_true '"nothing was restored" in d["reached"] and "incomplete restore" not in d["reached"]'
json_true 'all(r["exit"] == 0 for r in d["replays"])'
if [ "${E2E_REPLAYS:-}" = launches ]; then
  json_is replay_mode '"launches"'
else
  json_is replay_mode '"sessions"'
fi
run_dtrace 0 bisect --trust a b
out_has "generator: the state of a generator step 0 draws from differs: step rng state python"
out_has "step 0 is where both runs begin: nothing was restored"
out_lacks "incomplete restore"

# At layer level a backward's parameter gradient differs first, its
# grad_output (recorded after it) differing too: a receiver, the generator
# named beside it.
ex --steps 1 --unseeded --python-random --level layer --run-dir la
ex --steps 1 --unseeded --python-random --level layer --run-dir lb
run_dtrace 1 diff --json la lb
json_true 'd["first"]["role"] in ("unknown", "receiver")'
json_is first.generator.name '"python"'
echo ok
