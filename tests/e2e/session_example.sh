#!/usr/bin/env bash
# The Python rank of dtrace-fp(5)'s EXAMPLES that serves a replay session
# without the library, as printed there, with a stand-in workload around it:
# replay(env, start) answers a request as a launch would (running, records)
# and returns a copy of the state it started step N from; restore(start) puts
# it back into the model, which each step changes. Driven by hand
# (session-lib.sh), the example answers step replays before and after an
# isolation with the same records, the first alone with its fast-forward, each
# answer ending in "done PID TIME"; the end request ends it with exit 0.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
: "${SOURCE_ROOT:?}"
command -v python3 >/dev/null || skip "python3 is not installed"

cat >example.py <<'PY'
import copy, json, os
model = {"w": [1.0, 2.0]}  # the state a step changes
def write(env, records):  # the answer's rank file: a header, then records
    with open(f"{env['DTRACE_OUT_DIR']}/rank0.jsonl", "a") as f:
        if f.tell() == 0:
            print(json.dumps({"dtrace": 1, "replay": {"protocol": "dtrace-replay/1.2"}}), file=f)
        for r in records: print(json.dumps(r), file=f)
def replay(env, start):
    os.makedirs(env["DTRACE_OUT_DIR"], exist_ok=True)
    with open(f"{env['DTRACE_OUT_DIR']}/rank0.status", "w") as f: print(f"running {os.getpid()}", file=f)
    if "DTRACE_ISOLATE" in env:  # captured parameters loaded into the model
        model["w"] = [-7.0, -7.0]
        write(env, [{"step": 0, "isolated": env["DTRACE_ISOLATE"], "w": model["w"]}])
        return None
    if start is None and env.get("DTRACE_FAST_FORWARD") == "step": write(env, [{"step": 4, "name": "ff"}])
    kept = copy.deepcopy(model)
    write(env, [{"step": 5, "io": "state", "w": list(model["w"])}])
    model["w"] = [x * 0.5 + 1 for x in model["w"]]
    write(env, [{"step": 5, "io": "out", "w": model["w"]}])
    return kept
def restore(start): model.update(copy.deepcopy(start))
PY
sed -n '/^The same rank serving a replay session/,/^\.fi/p' "$SOURCE_ROOT/man/dtrace-fp.5" |
  sed -n '/^\.nf/,/^\.fi/p' | sed '1d;$d' | sed 's/\\\\/\\/g; s/^\\&//' >>example.py
grep -q 'request.get("end")' example.py || fail "the session example was not found in dtrace-fp(5)"

session_start "$WORK/session" 5 python3 example.py
session_serve 0 "$WORK/s0" 1 DTRACE_LEVEL=layer DTRACE_FAST_FORWARD=step
session_serve 1 "$WORK/s1" 1 DTRACE_ISOLATE=fwd/layer.1 "DTRACE_INPUTS=$WORK/cap"
session_serve 2 "$WORK/s2" 1 DTRACE_LEVEL=layer DTRACE_FAST_FORWARD=step
session_end 3
first=$(grep '"step": 5' s0/rank0.jsonl) second=$(grep '"step": 5' s2/rank0.jsonl)
{ [ -z "$first" ] || [ "$first" != "$second" ]; } && fail "the second step replay differs from the first: $second"
grep -q '"ff"' s0/rank0.jsonl || fail "the first step replay did not record its fast-forward"
grep -q '"ff"' s2/rank0.jsonl && fail "the second step replay fast-forwarded"
grep -q '"isolated": "fwd/layer.1"' s1/rank0.jsonl || fail "the isolation was not served"
for d in s0 s1 s2; do
  grep -qE '^done [0-9]+ [0-9]+$' "$d/rank0.status" || fail "$d/rank0.status: $(cat "$d/rank0.status")"
done
echo ok
