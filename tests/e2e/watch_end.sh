#!/usr/bin/env bash
# The end of a run as `dtrace watch` meets it (dtrace-fp(5), The end of a
# run), on the files minitrain's recorder writes with --out, outside any
# workflow variable:
# - the recorder leaves each rank's end marker, rank<r>.status saying
#   "exit 0", so watch ends within moments of a job that ends, never after
#   --idle; a status saying "running" (a job still writing) ends nothing;
# - a rank whose file comes after the idle time is waited for: the run ends
#   with every rank compared, not one;
# - a job killed by a signal leaves "running": the idle time ends the run.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/minitrain-lib.sh"
. "$HERE/watch-lib.sh"
small=(--d-model 16 --layers 1 --heads 2 --seq 8 --batch 4 --ranks 2)

# wait_until SECONDS CONDITION...: runs CONDITION every 50 ms until it holds;
# fails after SECONDS (generous: a loaded machine is slow, a right one quick).
wait_until() {
  local limit=$(($1 * 20)) tries=0
  shift
  until "$@"; do
    tries=$((tries + 1))
    [ "$tries" -lt "$limit" ] || fail "waited in vain: $*"
    sleep 0.05
  done
}

# ended_with FILE STEPS RANKS REASON: FILE's last event says the run ended
# identical over steps STEPS (a JSON pair) on RANKS ranks, for a reason
# matching REASON.
ended_with() {
  events_valid "$1"
  last_event "$1" | jq -e --argjson steps "$2" --argjson ranks "$3" --arg reason "$4" '
    .event == "ended" and .diff.verdict == "identical" and .diff.compared.steps == $steps
    and .diff.compared.ranks == $ranks and (.reason | test($reason))' >/dev/null ||
    fail "$1: not ended identical over $2 on $3 ranks ($4): $(last_event "$1")"
}

mt "${small[@]}" --steps 12 --out ref
for r in 0 1; do
  [ "$(head -n1 ref/rank$r.status | cut -c1-7)" = "exit 0 " ] ||
    fail "minitrain --out left no end marker for rank $r: $(cat ref/rank$r.status 2>&1)"
done

# A job still writing, watched with an idle time it never reaches: its status
# says "running" until it exits, which is no end; then its end markers end the
# watch over all 12 steps, seconds after the job, not --idle.
"$MINITRAIN" "${small[@]}" --steps 12 --step-delay-ms 150 --out live >job.log 2>&1 &
job=$!
expect_status 0 "$DTRACE" watch live --against ref --idle 60 --json
wait "$job" || fail "the job failed: $(cat job.log)"
ended_with out.txt '[0, 11]' 2 "end marker"

# Rank 1's file comes after the idle time (rank 0's run and status are
# there from the start): watch waits for it and compares both ranks.
mt "${small[@]}" --steps 12 --out job
mkdir late
cp job/rank0.jsonl job/rank0.status late/
"$DTRACE" watch late --against ref --idle 0.2 --progress 0.05 --json >late.jsonl 2>late.err &
watch=$!
rank0_compared() { jq -e 'select(.event == "progress") | .progress.ranks["0"] == 11' late.jsonl >/dev/null 2>&1; }
# (or watch ended: that is the failure checked next, found at once)
rank0_compared_or_ended() { rank0_compared || ! kill -0 "$watch" 2>/dev/null; }
wait_until 60 rank0_compared_or_ended
# Ten idle times for a watch that would end without rank 1 to end.
for _ in $(seq 40); do
  kill -0 "$watch" 2>/dev/null || break
  sleep 0.05
done
kill -0 "$watch" 2>/dev/null || fail "watch ended without rank 1: $(cat late.jsonl late.err)"
cp job/rank1.jsonl late/
cp job/rank1.status late/.rank1.status.tmp
mv late/.rank1.status.tmp late/rank1.status
status=0
wait "$watch" || status=$?
[ "$status" = 0 ] || fail "watch of a late rank exited $status: $(cat late.err)"
ended_with late.jsonl '[0, 11]' 2 "end marker"

# A job killed by SIGKILL writes no end marker: the idle time ends the run,
# over the steps it completed.
"$MINITRAIN" "${small[@]}" --steps 100000 --step-delay-ms 20 --out killed >job.log 2>&1 &
job=$!
step3_written() { grep -q '"step":3,"rank":1,"end":true' killed/rank1.jsonl 2>/dev/null; }
wait_until 60 step3_written
kill -KILL "$job"
status=0
wait "$job" 2>/dev/null || status=$?
[ "$status" = 137 ] || fail "the job was not killed by SIGKILL (status $status): $(cat job.log)"
grep -q '^running ' killed/rank0.status || fail "a killed rank's status: $(cat killed/rank0.status)"
expect_status 0 "$DTRACE" watch killed --against ref --idle 0.3 --json
events_valid out.txt
last_event out.txt | jq -e '.event == "ended" and .diff.verdict == "identical" and .diff.compared.steps[0] == 0
                            and .diff.compared.steps[1] >= 3 and (.reason | test("nothing grew for 0.3 s"))' \
  >/dev/null || fail "killed: $(last_event out.txt)"
echo ok
