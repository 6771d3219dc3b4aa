#!/bin/bash
# dtrace record under a replay request (DTRACE_SESSION, DTRACE_OUT_DIR,
# DTRACE_OUT, DTRACE_REPLAY_STEP or DTRACE_ISOLATE set): it replaces itself with
# CMD (same process, CMD's exit status), with PYTHONPATH, the replay command
# and the working directory, but no run directory and no notes; --out and
# --level are refused.
. "$(dirname "$0")/record-lib.sh"

here=$(pwd -P)
DTRACE_REPLAY_STEP=3 DTRACE_LEVEL=kernel DTRACE_RUN_DIR=$WORK/elsewhere DTRACE_RECORD_NOTES=$WORK/notes \
  PYTHONPATH=/old run_dtrace 0 record -- "$PY" "$DUMP_ENV" "$WORK/env.json"
env_is env.json PYTHONPATH "$STANDIN/dtrace_torch/bootstrap:$STANDIN:/old"
env_is env.json STANDIN_LOADED 1
env_is env.json DTRACE_REPLAY_STEP 3
env_is env.json DTRACE_LEVEL kernel
env_is env.json DTRACE_RECORD_CWD "$here"
env_is env.json DTRACE_RECORD_REPLAY_ARGV "$("$PY" -c 'import json, sys; print(json.dumps(sys.argv[1:], separators=(",", ":")))' \
  "$(realpath "$DTRACE")" record -- "$PY" "$DUMP_ENV" "$WORK/env.json")"
env_lacks env.json DTRACE_RUN_DIR
env_lacks env.json DTRACE_RECORD_NOTES

# Each request variable makes a replay: CMD's own status and process (its
# parent is this shell, not a dtrace waiting for it).
for variable in DTRACE_SESSION DTRACE_OUT_DIR DTRACE_OUT DTRACE_REPLAY_STEP DTRACE_ISOLATE; do
  env "$variable=x" "$DTRACE" record -- sh -c 'echo "parent=$PPID"; exit 5' >"$OUT" 2>"$ERR"
  status=$?
  [ "$status" = 5 ] || fail "$variable: exit status $status, expected CMD's 5"
  out_has "parent=$$"
done

DTRACE_OUT_DIR=$WORK/o run_dtrace 2 record --out runs/a -- true
trouble_is "--out is the recording's: a replay (DTRACE_OUT_DIR is set)"
DTRACE_OUT_DIR=$WORK/o run_dtrace 2 record --level layer -- true
trouble_is "--level is the recording's"
[ ! -e runs/a ] || fail "a replay created --out"

DTRACE_OUT_DIR=$WORK/o run_dtrace 127 record -- "$WORK/no-such-command"
trouble_is "cannot run $WORK/no-such-command"
echo ok
