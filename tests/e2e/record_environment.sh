#!/bin/bash
# dtrace record's variables for CMD (man/dtrace.1, RECORD): PYTHONPATH (the
# bootstrap, the packages, then the caller's), so a Python process loads the
# bootstrap's sitecustomize.py; DTRACE_RUN_DIR absolute; the replay command;
# the working directory; a notes directory removed at the end; --level.
. "$(dirname "$0")/record-lib.sh"

here=$(pwd -P)
self=$(realpath "$DTRACE")
PYTHONPATH="/old/a:$STANDIN:/old/b" run_dtrace 2 record --level layer --out runs/a -- "$PY" "$DUMP_ENV" "$WORK/env.json"
env_is env.json PYTHONPATH "$STANDIN/dtrace_torch/bootstrap:$STANDIN:/old/a:/old/b"
env_is env.json STANDIN_LOADED 1
env_is env.json DTRACE_RUN_DIR "$here/runs/a"
env_is env.json DTRACE_RECORD_CWD "$here"
env_is env.json DTRACE_LEVEL layer
env_is env.json DTRACE_RECORD_REPLAY_ARGV "$("$PY" -c 'import json, sys; print(json.dumps(sys.argv[1:], separators=(",", ":")))' \
  "$self" record -- "$PY" "$DUMP_ENV" "$WORK/env.json")"
notes=$("$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["DTRACE_RECORD_NOTES"])' env.json)
[ -n "$notes" ] || fail "DTRACE_RECORD_NOTES is empty"
[ ! -e "$notes" ] || fail "the notes directory $notes was left behind"

# Without --level the level is the program's default: no DTRACE_LEVEL; no
# PYTHONPATH before: only ours.
unset PYTHONPATH
run_dtrace 2 record --out runs/a -- "$PY" "$DUMP_ENV" "$WORK/env.json"
env_lacks env.json DTRACE_LEVEL
env_is env.json PYTHONPATH "$STANDIN/dtrace_torch/bootstrap:$STANDIN"

# A relative DTRACE_PYTHONPATH is made absolute; CMD runs in our directory
# (found on PATH, as a shell would).
mkdir sub && cd sub
DTRACE_PYTHONPATH=../standin-python PATH="$(dirname "$PY"):$PATH" \
  run_dtrace 2 record --out ../runs/a -- python3 "$DUMP_ENV" "$WORK/env2.json"
env_is "$WORK/env2.json" PYTHONPATH "$STANDIN/dtrace_torch/bootstrap:$STANDIN"
env_is "$WORK/env2.json" DTRACE_RECORD_CWD "$here/sub"
env_is "$WORK/env2.json" DTRACE_RUN_DIR "$here/runs/a"
echo ok
