#!/bin/bash
# Numbers and paths on the command line that no run can answer: each is trouble
# in one line naming the option and the range it takes, before anything is read
# or run. (CLI11's own checks clamped `--step 99999999999999999999` to 2^63-1,
# and bisect replayed a rank the job never had before saying so.)
. "$(dirname "$0")/lib.sh"
CLEAN=$TESTDATA/check/clean

run_dtrace 2 show "$CLEAN" --step -1
trouble_is "--step: '-1' is not a step (an integer from 0 to 9223372036854775807)"
run_dtrace 2 show "$CLEAN" --step 99999999999999999999
trouble_is "--step: '99999999999999999999' is not a step"
run_dtrace 2 show "$CLEAN" --rank 99999999999
trouble_is "--rank: '99999999999' is not a rank (an integer from 0 to 2147483647)"
run_dtrace 2 show "$CLEAN" --rank -1
trouble_is "--rank: '-1' is not a rank"
run_dtrace 0 show "$CLEAN" --step 2 --rank 1
out_has "records (step 2, rank 1)"

run_dtrace 2 bisect --step -1 --replay /bin/true "$CLEAN" "$CLEAN"
trouble_is "--step: '-1' is not a step"
run_dtrace 2 bisect --rank 99999999999 --replay /bin/true "$CLEAN" "$CLEAN"
trouble_is "--rank: '99999999999' is not a rank"
run_dtrace 2 bisect --timeout -5 --replay /bin/true "$CLEAN" "$CLEAN"
trouble_is "--timeout: '-5' is not a number of seconds above 0"
run_dtrace 2 bisect --timeout nan --replay /bin/true "$CLEAN" "$CLEAN"
trouble_is "--timeout: 'nan' is not a number of seconds above 0"
run_dtrace 2 verify --resume-at 99999999999999999999 -- /bin/true
trouble_is "--resume-at: '99999999999999999999' is not a step"
run_dtrace 2 tax --timeout 0 -- /bin/true
trouble_is "--timeout: '0' is not a number of seconds above 0"
run_dtrace 2 hash --threads 100000 "$CLEAN/rank0.jsonl"
trouble_is "--threads: '100000' is not a thread count"

# A rank outside the runs' world_size is refused before the workload runs.
cat >replay.sh <<'SH'
#!/bin/sh
touch "$0.ran"
SH
chmod +x replay.sh
run_dtrace 2 bisect --step 0 --rank 2 --replay "$WORK/replay.sh" "$CLEAN" "$CLEAN"
trouble_is "rank 2 is outside run A ($CLEAN): its world_size is 2"
[ ! -e replay.sh.ran ] || fail "bisect ran the workload for a rank the runs do not have"
# So is a step neither run recorded: there is nothing to check a replay against.
run_dtrace 2 bisect --step 50 --replay "$WORK/replay.sh" "$CLEAN" "$CLEAN"
trouble_is "step 50 of rank 0 is complete in neither run (A: $CLEAN, B: $CLEAN); bisect replays a step the runs recorded (\`dtrace show RUN\` lists them)"
[ ! -e replay.sh.ran ] || fail "bisect ran the workload for a step the runs do not have"

# A directory where a file is expected, and one run given as both A and B.
mkdir dir
run_dtrace 2 hash dir
trouble_is "dir: is a directory"
run_dtrace 0 diff "$CLEAN" "$CLEAN/"
out_has "identical"

# world_size 0, negative, or 10^12 (no ranks of it present: counted, not listed one by one).
for ws in 0 -1; do
  mkdir "ws$ws"
  { echo "{\"dtrace\":\"fp/1\",\"run\":\"a\",\"world_size\":$ws,\"hash\":\"xxh3-64k/1\",\"level\":\"layer\"}"
    tail -n +2 "$CLEAN/rank0.jsonl"; } >"ws$ws/rank0.jsonl"
  run_dtrace 2 check "ws$ws"
  trouble_is "ws$ws/rank0.jsonl:1: header field 'world_size' must be a positive integer"
done
mkdir huge
{ echo '{"dtrace":"fp/1","run":"a","world_size":1000000000000,"hash":"xxh3-64k/1","level":"layer"}'
  tail -n +2 "$CLEAN/rank0.jsonl"; } >huge/rank0.jsonl
run_dtrace 1 check --json huge
json_is violation_counts.rank-absent 999999999999
json_true 'len(d["violations"]) <= 50'
run_dtrace 2 diff "$CLEAN" huge
trouble_is "runs cannot be compared: "
echo ok
