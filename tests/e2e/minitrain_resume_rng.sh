#!/usr/bin/env bash
# --nondet resume-rng: a resumed run re-seeds the dropout RNG instead of
# restoring it. Against the uninterrupted run, the first mismatch is the RNG
# state record --print-planted names, at the resume step, before any kernel.
. "$(dirname "$0")/minitrain-lib.sh"
state=$("$MINITRAIN" --print-planted resume-rng | jq -r .state)
[ "$state" = dropout_rng ] || fail "print-planted resume-rng says '$state'"
mt --steps 8 --ranks 2 --nondet resume-rng --checkpoint-every 4 --checkpoint-dir ck --out full
mt --steps 8 --ranks 2 --nondet resume-rng --checkpoint-dir ck --resume --out resumed
expect_status 1 "$DTRACE" diff --json full resumed
got=$(jq -r '[.first.step, .first.io, .first.name] | join(" ")' "$WORK/out.txt")
[ "$got" = "4 state $state" ] || fail "first divergence '$got', expected '4 state $state'"

# Without the switch the same resume restores the RNG.
mt --steps 8 --ranks 2 --checkpoint-every 4 --checkpoint-dir ck2 --out full2
mt --steps 8 --ranks 2 --checkpoint-dir ck2 --resume --out resumed2
expect_status 0 "$DTRACE" diff full2 resumed2

# Replaying the resumed configuration takes the resumed run's restore path:
# the replayed step-start state is what the resumed run recorded.
mapfile -t argv < <(replay_argv resumed)
DTRACE_REPLAY_STEP=5 DTRACE_OUT="$WORK/replay.jsonl" "${argv[@]}" >/dev/null
expect_status 0 "$DTRACE" diff resumed replay.jsonl
echo ok
