#!/bin/bash
# dtrace record, CMD exited 0 but recorded nothing: exit 2, what record looked
# for, and what each Python process noted (or that none imported torch); a
# damaged note is named and skipped.
. "$(dirname "$0")/record-lib.sh"

run_dtrace 2 record --out runs/a -- true
err_has "dtrace: error: true recorded nothing in runs/a"
err_has "a torch.optim optimizer's step() after the backward()"
err_has "dtrace: error: no Python process of true imported torch"

STANDIN_NOTE='{"torch": "1.13.0", "rank": 0, "optimizers": 0, "forwards": 4, "backwards": 4, "steps": 0,
  "recorded": false, "explicit": false, "error": null}' \
  run_dtrace 2 record --out runs/a -- "$PY" -c pass --flag
err_has "a torch.optim optimizer's step()"
err_has "(-c --flag), rank 0, torch 1.13.0: 0 optimizers, 4 forwards, 4 backwards, 0 steps, recorded nothing"
! grep -qF "no Python process" "$ERR" || fail "a process that noted is not 'no Python process'"

# A damaged note (not JSON) beside a good one: named, never fatal.
STANDIN_NOTE='{"optimizers": 0}' run_dtrace 2 record --out runs/a -- \
  sh -c 'echo "{cut" >"$DTRACE_RECORD_NOTES/1.json"; exec "$0" -c pass' "$PY"
err_has "dtrace: warning: a note of CMD's processes is ignored: "
err_has "/1.json: not JSON"
err_has ": 0 optimizers"
echo ok
