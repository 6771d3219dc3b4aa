#!/usr/bin/env bash
# dtrace verify certifies two (or three) independent deterministic minitrain
# arms as bit-identical, and leaves the user's own --out alone.
. "$(dirname "$0")/minitrain-lib.sh"
expect_status 0 "$DTRACE" verify --json -- "$MINITRAIN" --steps 3 --ranks 2 --out mine
jq -e '.certified == true and .guarantee == "run-to-run" and .verdict == "identical"' out.txt >/dev/null ||
  fail "not certified: $(jq -c '{certified, guarantee, verdict}' out.txt)"
jq -e '.level == "step" and .world_size == 2 and .first == null' out.txt >/dev/null || fail "level/world"
jq -e '.compared.steps == [0, 2] and .compared.step_count == 3 and .compared.ranks == 2 and .compared.records > 0' \
  out.txt >/dev/null || fail "compared: $(jq -c .compared out.txt)"
[ "$(jq -r '[.workload.arms[].label] | join(" ")' out.txt)" = "arm1 arm2" ] || fail "arms"
[ ! -e mine ] || fail "an arm wrote the user's --out"

# Replay variables left in the shell do not turn the arms into replays.
DTRACE_REPLAY_STEP=1 DTRACE_OUT=stray.jsonl expect_status 0 "$DTRACE" verify --arms 3 -- "$MINITRAIN" --steps 3 --out mine
grep -q "^certified: run-to-run reproducibility (3 independent arms), bit-identical" out.txt ||
  fail "text certificate: $(cat out.txt)"
grep -q "arm1 vs arm3 (run to run): identical, 3 steps (0-2) x 1 rank" out.txt || fail "arm1 vs arm3"

# Arms that agree under an env value dtrace env rejects (dtrace(1)) are certified, with a note.
NCCL_ALGO=Tree expect_status 0 "$DTRACE" verify --json -- "$MINITRAIN" --steps 2 --no-deterministic-mode --out mine
jq -e '.certified and (.notes[0] | startswith("the workload ran with NCCL_ALGO=Tree, whose reduction order is not fixed"))' \
  out.txt >/dev/null || fail "env note: $(jq -c .notes out.txt)"
echo ok
