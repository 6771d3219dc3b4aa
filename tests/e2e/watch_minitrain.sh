#!/usr/bin/env bash
# dtrace watch on a job while it runs (dtrace(1), watch): minitrain with a bit
# flipped on rank 2 at step 12 (--flip-bit 2:12), slowed to 200 ms a step, is
# watched against a clean reference and, with no reference, across its replica
# group (the header's). Both report step 12 while the job is still running
# (before its end markers are written; 27 steps of 200 ms remain); the
# lag from the moment the step's end line was written to the report is printed
# (a measurement, not asserted). A clean job watched to its end exits 0.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/minitrain-lib.sh"
. "$HERE/watch-lib.sh"
small=(--d-model 16 --layers 1 --heads 2 --seq 8 --batch 4 --ranks 4)

mt "${small[@]}" --steps 40 --out ref

"$MINITRAIN" "${small[@]}" --steps 40 --flip-bit 2:12 --step-delay-ms 200 --out run >job.log 2>&1 &
job=$!
# A stopwatch beside watch: when rank 2's end line of step 12 appears.
python3 - run/rank2.jsonl >appeared.txt <<'PY' &
import os, sys, time
path, seen = sys.argv[1], ""
while not os.path.exists(path):
    time.sleep(0.001)
with open(path) as f:
    while '"step":12,"rank":2,"end":true' not in seen:
        chunk = f.read()
        seen = seen[-200:] + chunk if chunk else seen
        if not chunk:
            time.sleep(0.001)
print(time.time())
PY
stopwatch=$!
"$DTRACE" watch run --replicas header --json --idle 60 >replicas.jsonl 2>replicas.err &
replicas_watch=$!
expect_status 1 "$DTRACE" watch run --against ref --json --idle 60
kill -0 "$job" 2>/dev/null || fail "the job had ended before watch reported the divergence"
replicas_status=0
wait "$replicas_watch" || replicas_status=$?
wait "$stopwatch"
wait "$job" || fail "the job failed: $(cat job.log)"
# When the job ended: its ranks' end markers, written as minitrain exits.
job_ended=$(python3 -c 'import os, sys; print(min(os.stat(p).st_mtime for p in sys.argv[1:]))' run/rank*.status)

events_valid out.txt
tail -n1 out.txt >diverged.json
jq -e '.event == "diverged" and .diff.first.step == 12
       and ([.diff.ranks[] | select(.rank == 2 and .step == 12 and .op == "param" and .io == "state")] | length) == 1' \
  diverged.json >/dev/null || fail "against ref: $(cat diverged.json)"
[ "$replicas_status" = 1 ] || fail "watch --replicas exited $replicas_status: $(cat replicas.err)"
events_valid replicas.jsonl
tail -n1 replicas.jsonl >departed.json
jq -e '.event == "departed" and .departure.step == 12 and .departure.departing == [2] and .departure.majority
       and .departure.op == "param"' departed.json >/dev/null || fail "replicas: $(cat departed.json)"
jq -e --argjson ended "$job_ended" '.reported_at < $ended' departed.json >/dev/null ||
  fail "watch --replicas reported the departure only after the job had ended ($job_ended): $(cat departed.json)"
written=$(cat appeared.txt)
echo "lag, step 12 written -> reported: against ref $(jq -r --argjson w "$written" '.reported_at - $w' diverged.json) s," \
     "replicas $(jq -r --argjson w "$written" '.reported_at - $w' departed.json) s"

# Watched after the job, the same run gives the same answer; a clean job
# watched while it runs ends identical.
expect_status 1 "$DTRACE" watch run --against ref --idle 0.2
"$MINITRAIN" "${small[@]}" --steps 10 --step-delay-ms 50 --out clean >job.log 2>&1 &
job=$!
expect_status 0 "$DTRACE" watch clean --against ref --replicas header --idle 1 --json
wait "$job"
tail -n1 out.txt | jq -e '.event == "ended" and .diff.verdict == "identical" and .diff.compared.steps == [0, 9]
                          and .replicas.verdict == "agree" and .replicas.compared.step_count == 10' >/dev/null ||
  fail "clean: $(tail -n1 out.txt)"
echo ok
