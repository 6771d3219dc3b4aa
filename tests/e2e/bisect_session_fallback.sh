#!/usr/bin/env bash
# The runs' headers say their workload serves replay sessions (minitrain,
# dtrace-replay/1.2), but their replay command is a wrapper that runs one replay per
# start and knows nothing of sessions (it drops DTRACE_SESSION, as an older
# wrapper's environment filter would; the runs' headers are edited to name it,
# as a job started through it would have recorded): its session exits 0 without answering
# the first request. bisect then launches that side for each replay instead
# and says so, rather than failing with a workload that works.
. "$(dirname "$0")/bisect-lib.sh"
mt --steps 2 --nondet splitk --chaos-seed 1 --out a
mt --steps 2 --nondet splitk --chaos-seed 2 --out b
# 1.3 (pinned ops) includes 1.2's sessions.
head -n1 a/rank0.jsonl | grep -q '"protocol":"dtrace-replay/1.3"' || fail "minitrain no longer announces sessions"
# The runs say they were started through the wrapper (each keeps its own argv).
cat >wrapper.sh <<SH
#!/bin/sh
echo start >>"$WORK/starts"
unset DTRACE_SESSION
exec "$MINITRAIN" "\$@"
SH
chmod +x wrapper.sh
for f in a/rank*.jsonl b/rank*.jsonl; do
  python3 - "$f" "$WORK/wrapper.sh" <<'PY'
import json, sys
path, wrapper = sys.argv[1], sys.argv[2]
lines = open(path).read().split("\n")
header = json.loads(lines[0])
header["replay"]["argv"] = [wrapper] + header["replay"]["argv"][1:]
lines[0] = json.dumps(header, separators=(",", ":"))
open(path, "w").write("\n".join(lines))
PY
done
run_dtrace 0 bisect --trust --json a b
json_is verdict '"named"'
json_is culprit.op "\"$(planted splitk op)\""
json_is replay_mode '"launches"'
json_true '"launched for each replay instead" in d["replay_mode_why"]'
json_true 'any("exited 0 without answering" in n for n in d["notes"])'
# Each side: one session that answered nothing, then one launch per replay.
json_true 'sum(1 for l in d["launches"] if l["session"]) == 2 and all(l["requests"] == 1 for l in d["launches"])'
json_true 'len(d["launches"]) == 2 + len(d["replays"])'
json_true 'all(r["via"] == "launch" for r in d["replays"])'
[ "$(wc -l <"$WORK/starts")" -eq "$(python3 -c 'import json; print(len(json.load(open("'"$OUT"'"))["launches"]))')" ] ||
  fail "the wrapper started $(wc -l <"$WORK/starts") times"
echo ok
