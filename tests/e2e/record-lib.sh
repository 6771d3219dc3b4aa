# Shared by tests/e2e/record_*.sh: dtrace record's own behaviour, without
# torch. DTRACE_PYTHONPATH points at a stand-in package directory whose
# bootstrap's sitecustomize.py takes the automatic recorder's place (that
# recorder and torch are the torch tests'): every Python process of CMD loads
# it, and it sets STANDIN_LOADED and, when STANDIN_NOTE holds a JSON object,
# leaves it at its exit as the process's note in DTRACE_RECORD_NOTES, with
# its pid and argv filled in.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PY=/usr/bin/python3
[ -x "$PY" ] || skip "no $PY"
STANDIN=$WORK/standin-python
mkdir -p "$STANDIN/dtrace_torch/bootstrap"
cat >"$STANDIN/dtrace_torch/bootstrap/sitecustomize.py" <<'PYEOF'
import atexit, json, os, sys

os.environ["STANDIN_LOADED"] = "1"


def _leave_note():
    note, notes = os.environ.get("STANDIN_NOTE"), os.environ.get("DTRACE_RECORD_NOTES")
    if not note or not notes:
        return
    doc = json.loads(note)
    doc.setdefault("pid", os.getpid())
    doc.setdefault("argv", sys.argv)
    with open(os.path.join(notes, f"{os.getpid()}.json"), "w") as f:
        json.dump(doc, f)


atexit.register(_leave_note)
PYEOF
export DTRACE_PYTHONPATH=$STANDIN
unset DTRACE_SESSION DTRACE_OUT_DIR DTRACE_OUT DTRACE_REPLAY_STEP DTRACE_ISOLATE DTRACE_LEVEL \
  DTRACE_RUN_DIR DTRACE_RECORD_NOTES STANDIN_NOTE

# A CMD that dumps its environment as JSON into FILE: `$PY "$DUMP_ENV" FILE`.
DUMP_ENV=$WORK/dump_env.py
cat >"$DUMP_ENV" <<'PYEOF'
import json, os, sys
json.dump(dict(os.environ), open(sys.argv[1], "w"))
PYEOF

# env_is FILE NAME VALUE / env_lacks FILE NAME: what the dumped environment holds.
env_is() {
  "$PY" -c 'import json, sys
env = json.load(open(sys.argv[1]))
got = env.get(sys.argv[2])
if got != sys.argv[3]:
    sys.exit(f"{sys.argv[2]} is {got!r}, expected {sys.argv[3]!r}")' "$@" || fail "environment: $2"
}
env_lacks() {
  "$PY" -c 'import json, sys
env = json.load(open(sys.argv[1]))
if sys.argv[2] in env:
    sys.exit(f"{sys.argv[2]} is set: {env[sys.argv[2]]!r}")' "$@" || fail "environment: $2 set"
}
