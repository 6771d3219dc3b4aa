#!/usr/bin/env bash
# The Python program of dtrace-fp(5)'s EXAMPLES that serves a replay session
# without the library, as printed there, with a stand-in workload around it
# (restore, step, isolate: one parameter vector, a step that changes it):
# driven by hand (session-lib.sh), it answers step replays before and after an
# isolation with the same records (each from its own copy of the kept state),
# writes done after each answer, ends with exit 0 at the end request, and a
# request that raises leaves "exit 1" in that request's status and its
# traceback in the session's rank0.stderr.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
: "${SOURCE_ROOT:?}"
command -v python3 >/dev/null || skip "python3 is not installed"

cat >example.py <<'PY'
import json, os
def write(env, records):  # the answer's rank file: a header, then records
    path = f"{env['DTRACE_OUT_DIR']}/rank0.jsonl"
    with open(path, "a") as f:
        if f.tell() == 0:
            print(json.dumps({"dtrace": 1, "run": "x", "world_size": 1, "replay": {"protocol": "dtrace-replay/1.2"}}), file=f)
        for r in records: print(json.dumps(r), file=f)
def restore(env):
    if env.get("DTRACE_FAST_FORWARD") == "step": write(env, [{"step": 4, "name": "ff"}])
    return {"w": [1.0, 2.0]}
def step(state, env):
    if env.get("DTRACE_TEST_FAIL"): raise RuntimeError("a request this program cannot serve")
    write(env, [{"step": 5, "io": "state", "w": list(state["w"])}])
    state["w"] = [x * 0.5 + 1 for x in state["w"]]  # what the step changes
    write(env, [{"step": 5, "io": "out", "w": state["w"]}])
def isolate(env): write(env, [{"step": 0, "isolated": env["DTRACE_ISOLATE"]}])
PY
sed -n '/example-begin session/,/example-end/p' "$SOURCE_ROOT/man/dtrace-fp.5" | sed '1,2d;$d' | sed '$d' |
  sed 's/\\e/\\/g; s/^\\&//' >>example.py
grep -q 'request.get("end")' example.py || fail "the example was not found in dtrace-fp(5)"

session_start "$WORK/session" 5 python3 example.py
session_serve 0 "$WORK/s0" 1 DTRACE_LEVEL=layer DTRACE_FAST_FORWARD=step
session_serve 1 "$WORK/s1" 1 DTRACE_ISOLATE=fwd/layer.1 "DTRACE_INPUTS=$WORK/cap"
session_serve 2 "$WORK/s2" 1 DTRACE_LEVEL=layer DTRACE_FAST_FORWARD=step
first=$(grep '"step": 5' s0/rank0.jsonl) second=$(grep '"step": 5' s2/rank0.jsonl)
{ [ -z "$first" ] || [ "$first" != "$second" ]; } && fail "the second step replay differs from the first: $second"
grep -q '"ff"' s0/rank0.jsonl || fail "the first step replay did not record its fast-forward"
grep -q '"ff"' s2/rank0.jsonl && fail "the second step replay fast-forwarded"
grep -q '"isolated": "fwd/layer.1"' s1/rank0.jsonl || fail "the isolation was not served"
session_request 3 "$(session_vars "$WORK/s3" DTRACE_TEST_FAIL=1)"
got=0; wait "$SESSION_PID" || got=$?
[ "$got" = 1 ] || fail "the example exited $got after a request that raised, expected 1"
grep -q '^exit 1 ' s3/rank0.status || fail "s3/rank0.status: $(cat s3/rank0.status)"
grep -q '^done ' s2/rank0.status || fail "the failure reached an earlier answer: $(cat s2/rank0.status)"
grep -q 'a request this program cannot serve' session/rank0.stderr || fail "no traceback in session/rank0.stderr"

session_start "$WORK/session2" 5 python3 example.py
session_serve 0 "$WORK/t0" 1 DTRACE_LEVEL=layer
session_end 1
grep -q '^done ' t0/rank0.status || fail "t0/rank0.status after the end: $(cat t0/rank0.status)"
echo ok
