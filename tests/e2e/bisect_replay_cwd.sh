#!/usr/bin/env bash
# A replay runs in the directory its run recorded (the header's replay.cwd),
# not where dtrace was started: a workload that names itself relatively
# (./workload.sh) is found there, and sees that directory as its own.
. "$(dirname "$0")/bisect-lib.sh"
mkdir -p runs proj elsewhere
mt --steps 2 --nondet splitk --chaos-seed 1 --out runs/a
mt --steps 2 --nondet splitk --chaos-seed 2 --out runs/b
PROJ=$(cd proj && pwd -P)
cat >proj/workload.sh <<SH
#!/bin/sh
pwd -P >>"$WORK/cwds"
exec "$MINITRAIN" "\$@"
SH
chmod +x proj/workload.sh

# The runs say they were started as ./workload.sh in proj/.
for f in runs/*/rank*.jsonl; do
  python3 - "$f" "$PROJ" <<'PY'
import json, sys
path, cwd = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
header = json.loads(lines[0])
header["replay"]["argv"] = ["./workload.sh"] + header["replay"]["argv"][1:]
header["replay"]["cwd"] = cwd
lines[0] = json.dumps(header, separators=(",", ":"))
open(path, "w").write("\n".join(lines))
PY
done

cd elsewhere || fail "cannot enter elsewhere"
run_dtrace 0 bisect --trust --json ../runs/a ../runs/b
json_is verdict '"named"'
json_is culprit.op "\"$(planted splitk op)\""
[ -s "$WORK/cwds" ] || fail "the workload never ran"
[ "$(sort -u "$WORK/cwds")" = "$PROJ" ] ||
  fail "replays ran in $(sort -u "$WORK/cwds" | tr '\n' ' '), not in the recorded $PROJ"
# One line per process started: per launch (not per replay: a replay session
# serves all of a side's replays).
json_true 'len(d["launches"]) == '"$(wc -l <"$WORK/cwds")"
echo ok
