#!/usr/bin/env bash
# An uninterrupted run and one resumed from its checkpoint agree on every
# common step; the resumed run is a new run directory starting at the
# checkpoint's step.
. "$(dirname "$0")/minitrain-lib.sh"
mt --steps 12 --ranks 2 --level layer --checkpoint-every 4 --checkpoint-dir ck --out full
[ -f ck/ckpt-00000004.bin ] && [ -f ck/ckpt-00000008.bin ] || fail "checkpoints missing: $(ls ck)"
ls ck | grep tmp >/dev/null && fail "a temporary checkpoint file was left behind"

mt --steps 12 --ranks 2 --level layer --checkpoint-dir ck --resume --out resumed
first=$(grep -m1 '"scope"' resumed/rank0.jsonl | jq .step)
[ "$first" -eq 8 ] || fail "resumed run starts at step $first, expected 8 (newest checkpoint)"
expect_status 0 "$DTRACE" check resumed
expect_status 0 "$DTRACE" diff full resumed
grep -q 'steps 0-7 only in run A' "$WORK/out.txt" || fail "diff should name the steps only in the full run"

mt --steps 12 --ranks 2 --level layer --checkpoint-dir ck --resume --resume-step 4 --out resumed4
expect_status 0 "$DTRACE" diff full resumed4
# The replay argv of a resumed run names the checkpoint it resumed from.
replay_argv resumed | grep -x -- --resume-step >/dev/null || fail "replay argv lacks --resume-step"
echo ok
