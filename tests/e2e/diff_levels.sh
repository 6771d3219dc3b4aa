#!/usr/bin/env bash
# Runs recorded at different levels: the same deterministic run at step, layer
# and kernel level diffs identical (a note says what was left out), and a
# difference planted in a record both levels write is found with its role.
. "$(dirname "$0")/bisect-lib.sh"
mt --steps 2 --level step --out step
mt --steps 2 --level layer --out layer
mt --steps 2 --level kernel --out kernel

run_dtrace 0 diff --json step kernel
json_is verdict '"identical"'
json_true 'any(h["section"] == "level" for h in d["header_differences"])'
json_true 'any(n.startswith("run B was recorded at level kernel, run A at level step: only the records both levels write are compared (") for n in d["notes"])'
run_dtrace 0 diff --json kernel layer
json_is verdict '"identical"'
json_true 'any(n.startswith("run A was recorded at level kernel, run B at level layer") for n in d["notes"])'
run_dtrace 0 diff layer step

# plant RUN FILTER: RUN's rank file with the first record matching FILTER (a
# Python expression over `r`) given another hash, as a run would differ.
plant() {
  python3 - "$1/rank0.jsonl" "$2" <<'PY'
import json, sys
path, cond = sys.argv[1], sys.argv[2]
lines = open(path).read().splitlines()
for i, line in enumerate(lines):
    r = json.loads(line)
    if "scope" in r and eval(cond):
        r["hash"] = "0123456789abcdef"
        lines[i] = json.dumps(r, separators=(",", ":"))
        break
else:
    sys.exit("nothing matches " + cond)
open(path, "w").write("\n".join(lines) + "\n")
PY
}

# A layer's output, written at layer and at kernel level: an origin (its
# inputs match; kernel records only the finer run has do not count).
cp -r kernel kernel-out
plant kernel-out 'r["step"] == 1 and r["scope"] == "fwd/layer.1/attn" and r["op"] == "attn" and r["io"] == "out"'
run_dtrace 1 diff --json layer kernel-out
json_is first.step 1
json_is first.scope '"fwd/layer.1/attn"'
json_is first.io '"out"'
json_is first.kind '"value"'
json_is first.role '"origin"'

# The loss, written at every level: a metric, role unknown, not "recorded in
# B only" and not a receiver.
cp -r kernel kernel-loss
python3 - kernel-loss/rank0.jsonl <<'PY'
import json, sys
path = sys.argv[1]
lines = open(path).read().splitlines()
for i, line in enumerate(lines):
    r = json.loads(line)
    if r.get("io") == "metric" and r.get("name") == "loss" and r["step"] == 0:
        r["bits"] = "%08x" % (int(r["bits"], 16) ^ 1)
        lines[i] = json.dumps(r, separators=(",", ":"))
open(path, "w").write("\n".join(lines) + "\n")
PY
run_dtrace 1 diff --json step kernel-loss
json_is first.step 0
json_is first.name '"loss"'
json_is first.kind '"value"'
json_is first.role '"unknown"'
json_is first.ulp 1
echo ok
