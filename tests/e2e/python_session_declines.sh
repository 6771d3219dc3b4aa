#!/usr/bin/env bash
# A replay session's workload that declines requests (dtrace-fp(5), "Replay
# sessions": "declined PID REASON"): the NumPy example with --decline-steps,
# which declines every step request after its session's first, as a program
# that runs its step once per process would. bisect names the same culprit as
# without declines, launches each declined request with the same variables
# and lists it among the launches with the workload's reason (text and JSON),
# and keeps each side's one session for the later requests. Two ranks through
# a plain launcher, rank 1 alone declining, is a request some ranks declined
# and others answered: bisect stops (exit 2) naming both.
. "$(dirname "$0")/python-lib.sh"
need_python_module numpy "tools/setup-deps.sh installs Debian's python3-numpy"
EXAMPLE="$SOURCE_ROOT/examples/numpy/numpytrain.py"
REASON="numpytrain --decline-steps: step 0 runs once per process"

# record DIR SEED ARGS...: a run of the planted reduction (chaos seed SEED).
record() {
  local dir=$1 seed=$2; shift 2
  "$@" --run-dir "$dir" --checkpoint-dir "c$dir" --steps 1 --level layer --planted --chaos-seed "$seed" \
    >/dev/null 2>"$WORK/$dir.err" || { cat "$WORK/$dir.err" >&2; fail "recording run $dir"; }
}

record a 1 "$PYTHON" "$EXAMPLE" --decline-steps all
record b 2 "$PYTHON" "$EXAMPLE" --decline-steps all
run_dtrace 0 bisect --trust --first --json a b
# The culprit of the same bisect without declines (e2e/python_recorder); the
# first alone (--first): the culprit search's later step requests would be declined too.
json_is verdict '"named"'
json_is culprit.op '"gemm"'
json_is culprit.scope '"fwd/layer.1"'
json_is culprit.rank 0
json_true '"reduction order" in d["evidence"]["reading"]'
json_is replay_mode '"sessions"'
json_is schema_version '"1.7"'
# One session per side; every step replay after its first (the capture
# stage's) launched, naming its session's request and the reason.
json_true '[l["side"] for l in d["launches"] if l["session"]] == ["A", "B"]'
json_true 'all(l["declined"] is None for l in d["launches"] if l["session"])'
json_true '[(r["stage"], r["side"], r["via"]) for r in d["replays"] if r["via"] == "launch"] == [("capture", "A", "launch"), ("capture", "B", "launch")]'
json_true 'all(d["launches"][r["launch"]]["declined"]["reason"] == "'"$REASON"'" for r in d["replays"] if r["via"] == "launch")'
json_true 'all(d["launches"][d["launches"][r["launch"]]["declined"]["session"]]["side"] == r["side"] for r in d["replays"] if r["via"] == "launch")'
json_true 'all(d["launches"][r["launch"]]["declined"]["request"] == 1 for r in d["replays"] if r["via"] == "launch")'
json_true 'all("DTRACE_SESSION" not in d["launches"][r["launch"]]["env"] for r in d["replays"] if r["via"] == "launch")'
# The session served the requests after the declined one (the kernel and confirm stages').
json_true '[r["stage"] for r in d["replays"] if r["via"] == "request" and r["side"] == "A"] == ["layer", "kernel", "confirm"]'
json_true 'all(r["exit"] == 0 for r in d["replays"])'
err_has "run A's replay session declined request 1 ($REASON): launched instead"
# The text report says it too.
run_dtrace 0 bisect --trust --first a b
out_has "launched, session 1 declined request 1 ($REASON): "
out_has "(1 declined, launched)"
# The Python documents read the new field.
run_dtrace 0 bisect --trust --first --json a b
"$PYTHON" - "$OUT" "$REASON" <<'PY' || fail "dtrace.documents does not read launches' declined"
import json, sys
from dtrace import documents
doc = documents.from_json(documents.Bisect, json.load(open(sys.argv[1])))
launched = [doc.launches[r.launch] for r in doc.replays if r.via == "launch"]
assert len(launched) == 2 and all(l.declined.reason == sys.argv[2] and l.declined.request == 1 for l in launched), launched
assert all(l.declined is None for l in doc.launches if l.session)
PY

# Two ranks, rank 1 alone declining: a mix dtrace refuses, naming both ranks.
LAUNCH="$PYTHON $SOURCE_ROOT/examples/numpy/launch.py 2"
for r in e f; do
  seed=$([ $r = e ] && echo 1 || echo 2)
  DTRACE_PYTHON_LAUNCHER="$LAUNCH" record $r "$seed" $LAUNCH "$PYTHON" "$EXAMPLE" --decline-steps 1
done
run_dtrace 2 bisect --trust e f
err_has "replay of run A (capture) failed in request 1 of its replay session (step 0, level kernel, scope fwd/layer.1, capture): rank 1 declined the request ($REASON), which rank 0 answered: every rank of the run declines a request, or none does"
echo ok
