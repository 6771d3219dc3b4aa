#!/usr/bin/env bash
# A replay session (dtrace-replay/1.2, dtrace-fp(5) "Replay sessions") served
# by minitrain, driven by hand as dtrace's runner drives it: one process,
# started with DTRACE_SESSION and DTRACE_REPLAY_STEP, answers a layer-level
# step replay, a capture, an isolation and a second step replay, each request
# file renamed into place once written, each answer read once every rank says
# done. Every answer must be what a launch with the same variables writes (the
# same files, dtrace diff: identical), and the step replay after the isolation
# must give the first step replay's records: the state at the start of the
# step is restored between requests. The process then exits 0 at the end
# request, leaving every answer's status at done.
. "$(dirname "$0")/minitrain-lib.sh"
mt --steps 7 --ranks 2 --level layer --checkpoint-every 2 --checkpoint-dir ck --out run --startup-delay 0.1
mapfile -t argv < <(replay_argv run)
# --startup-delay stands in for a job's start-up: replays pay it too.
[ "$(replay_argv run | grep -A1 -x -- --startup-delay | tail -n1)" = 0.1 ] ||
  fail "the replay argv lacks --startup-delay 0.1: ${argv[*]}"
[ "$(head -n1 run/rank0.jsonl | jq -r .replay.protocol)" = dtrace-replay/1.3 ] ||
  fail "minitrain does not announce sessions (1.3: and pins): $(head -n1 run/rank0.jsonl | jq -c .replay)"
step=5  # restored from checkpoint 4, step 4 fast-forwarded

. "$(dirname "$0")/session-lib.sh"
session_start "$WORK/session" $step "${argv[@]}"

# launch DIR NAME=VALUE...: the same replay as a launch.
launch() {
  local dir=$1; shift
  env "DTRACE_REPLAY_STEP=$step" "DTRACE_OUT_DIR=$WORK/$dir" "DTRACE_OUT=$WORK/$dir/replay.jsonl" "$@" \
    "${argv[@]}" >/dev/null || fail "the launch into $dir failed"
}

layer=(DTRACE_LEVEL=layer DTRACE_FAST_FORWARD=step)
capture=(DTRACE_LEVEL=kernel DTRACE_SCOPE=fwd/layer.1/mlp "DTRACE_CAPTURE=$WORK/cap-s")
isolate=(DTRACE_LEVEL=kernel DTRACE_SCOPE=fwd/layer.1/mlp DTRACE_ISOLATE=fwd/layer.1/mlp "DTRACE_INPUTS=$WORK/cap-s" DTRACE_REPEAT=2)
session_serve 0 "$WORK/s0" 2 "${layer[@]}"
session_serve 1 "$WORK/s1" 2 "${capture[@]}"
session_serve 2 "$WORK/s2" 2 "${isolate[@]}"
session_serve 3 "$WORK/s3" 2 "${layer[@]}"
session_end 4
for d in s0 s1 s2 s3; do
  for r in 0 1; do grep -q '^done ' "$d/rank$r.status" || fail "$d/rank$r.status: $(cat "$d/rank$r.status")"; done
done

launch l0 "${layer[@]}"
launch l1 DTRACE_LEVEL=kernel DTRACE_SCOPE=fwd/layer.1/mlp "DTRACE_CAPTURE=$WORK/cap-l"
launch l2 "${isolate[@]}"
for k in 0 1 2; do
  [ "$(ls "s$k")" = "$(ls "l$k")" ] || fail "request $k wrote $(ls "s$k" | tr '\n' ' '), a launch $(ls "l$k" | tr '\n' ' ')"
  expect_status 0 "$DTRACE" diff "s$k" "l$k"
  grep -q identical out.txt || fail "request $k and its launch differ: $(cat out.txt)"
done
[ "$(ls cap-s)" = "$(ls cap-l)" ] || fail "the session's capture holds other files than the launch's"
expect_status 0 "$DTRACE" diff cap-s cap-l
grep -q identical out.txt || fail "the captures differ: $(cat out.txt)"
# The first step replay recorded the fast-forwarded step 4, the later one only step 5.
[ "$(records s0/rank0.jsonl | jq -s -r '[.[].step] | unique | join(",")')" = 4,5 ] || fail "request 0 did not record the fast-forwarded step"
[ "$(records s3/rank0.jsonl | jq -s -r '[.[].step] | unique | join(",")')" = 5 ] || fail "request 3 recorded steps before $step"
# After the isolation (captured inputs loaded into a layer) and the capture,
# step 5 starts from the same state and records the same.
for r in 0 1; do
  a=$(step_records "s0/rank$r.jsonl" 5)
  b=$(step_records "s3/rank$r.jsonl" 5)
  { [ -z "$a" ] || [ "$a" != "$b" ]; } && fail "rank $r: the second step replay's records differ from the first's"
done
grep -q '"io":"state"' s3/rank0.jsonl || fail "the second step replay recorded no state"

# A request the workload cannot serve fails as a launch would: its exit code
# in that request's directory, the earlier answer left done, the process gone.
session_start "$WORK/session2" $step "${argv[@]}"
session_serve 0 "$WORK/t0" 2 "${layer[@]}"
session_request 1 "$(session_vars "$WORK/t1" DTRACE_LEVEL=kernel DTRACE_ISOLATE=fwd/layer.9/mlp "DTRACE_INPUTS=$WORK/cap-s")"
got=0; wait "$SESSION_PID" || got=$?
[ "$got" = 2 ] || fail "a session given a layer minitrain lacks exited $got, expected 2"
for r in 0 1; do
  grep -q '^exit 2 ' "t1/rank$r.status" || fail "t1/rank$r.status: $(cat "t1/rank$r.status")"
  grep -q '^done ' "t0/rank$r.status" || fail "t0/rank$r.status: $(cat "t0/rank$r.status")"
done
grep -q 'fwd/layer.9/mlp' session2.err || fail "the session's stderr does not name the layer: $(cat session2.err)"
echo ok
