#!/usr/bin/env bash
# The program's own resume (issue 28): gpt_moe.py --resume STEP hands the
# Recorder resume_at=STEP, which restores that checkpoint and starts there; the
# resumed run records steps STEP.. only, identical to the uninterrupted run's.
# DTRACE_RESUME_AT, the workflow variable, overrides it. A resume without that
# checkpoint, and a resume_at that is not a step number, are errors.
. "$(dirname "$0")/torch-lib.sh"
ex --steps 4 --run-dir a --checkpoint-dir ckpt --checkpoint-every 1
ex --steps 4 --resume 2 --run-dir b --checkpoint-dir ckpt
run_dtrace 0 diff --json a b
json_is compared.steps '[2, 3]'
DTRACE_RESUME_AT=3 ex --steps 4 --resume 2 --run-dir c --checkpoint-dir ckpt
run_dtrace 0 diff --json a c
json_is compared.steps '[3, 3]'

"$PYTHON" "$EXAMPLE" --steps 4 --resume 2 --run-dir d --checkpoint-dir ckpt-none >/dev/null 2>"$WORK/err" &&
  fail "a resume without its checkpoint ran"
grep -q "CheckpointError: .*no checkpoint of step 2" "$WORK/err" || { cat "$WORK/err" >&2; fail "no CheckpointError"; }

"$PYTHON" - <<'PY' || fail "resume_at is not checked"
import torch, dtrace_torch as dt
for bad in (-1, 1.5, True, "2"):
    try:
        dt.Recorder(torch.nn.Linear(2, 2), resume_at=bad)
    except (ValueError, TypeError):
        continue
    raise SystemExit(f"resume_at={bad!r} accepted")
PY
echo ok
