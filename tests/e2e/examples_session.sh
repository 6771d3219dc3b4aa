#!/usr/bin/env bash
# examples/tinytrain (C++, dtrace::ReplaySession) and examples/ctrain (the C
# API, dtrace_session_*) serve replay sessions (dtrace-replay/1.2): each
# announces 1.2, and one process answers a layer-level step replay, a capture,
# an isolation of a layer and a second step replay, driven by hand
# (session-lib.sh). Each answer is what a launch with the same variables writes
# (dtrace diff: identical), and the second step replay, after the isolation
# loaded captured inputs into the layer, records what the first recorded.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/session-lib.sh"
: "${BUILD_ROOT:?}"

# check_program NAME LAYER ARGV...: a run of ARGV (step 5 restores checkpoint 4
# and fast-forwards step 4), then its session and launches, LAYER the layer
# captured and isolated.
check_program() {
  local name=$1 layer=$2; shift 2
  mkdir "$name" && cd "$name" || fail "mkdir $name"
  "$@" --out "$PWD/run" --steps 6 --checkpoint-every 2 --checkpoint-dir "$PWD/ck" --level layer \
    >/dev/null 2>run.err || fail "$name: the run failed: $(cat run.err)"
  # 1.3 (pins) includes 1.2's sessions.
  [ "$(head -n1 run/rank0.jsonl | jq -r .replay.protocol)" = dtrace-replay/1.3 ] ||
    fail "$name does not announce sessions and pins: $(head -n1 run/rank0.jsonl | jq -c .replay)"
  mapfile -t argv < <(head -n1 run/rank0.jsonl | jq -r '.replay.argv[]')
  session_start "$PWD/session" 5 "${argv[@]}"
  local step=(DTRACE_LEVEL=layer DTRACE_FAST_FORWARD=step)
  local isolate=(DTRACE_LEVEL=kernel "DTRACE_SCOPE=$layer" "DTRACE_ISOLATE=$layer" "DTRACE_INPUTS=$PWD/cap-s" DTRACE_REPEAT=2)
  session_serve 0 "$PWD/s0" 1 "${step[@]}"
  session_serve 1 "$PWD/s1" 1 DTRACE_LEVEL=kernel "DTRACE_SCOPE=$layer" "DTRACE_CAPTURE=$PWD/cap-s"
  session_serve 2 "$PWD/s2" 1 "${isolate[@]}"
  session_serve 3 "$PWD/s3" 1 "${step[@]}"
  session_end 4
  launch() {
    local dir=$1; shift
    env -u DTRACE_SESSION DTRACE_REPLAY_STEP=5 "DTRACE_OUT_DIR=$PWD/$dir" "DTRACE_OUT=$PWD/$dir/replay.jsonl" "$@" \
      "${argv[@]}" >/dev/null 2>"$dir.err" || fail "$name: the launch into $dir failed: $(cat "$dir.err")"
  }
  launch l0 "${step[@]}"
  launch l1 DTRACE_LEVEL=kernel "DTRACE_SCOPE=$layer" "DTRACE_CAPTURE=$PWD/cap-l"
  launch l2 "${isolate[@]}"
  for pair in s0:l0 s1:l1 s2:l2 cap-s:cap-l; do
    local s=${pair%%:*} l=${pair#*:}
    [ "$(ls "$s")" = "$(ls "$l")" ] || fail "$name: $s holds $(ls "$s" | tr '\n' ' '), the launch's $l $(ls "$l" | tr '\n' ' ')"
    run_dtrace 0 diff "$s" "$l"
    grep -q identical "$OUT" || fail "$name: $s differs from its launch $l: $(cat "$OUT")"
  done
  grep -q '"step":4' s0/rank0.jsonl || fail "$name: the first step replay did not record the fast-forwarded step"
  grep -q '"step":4' s3/rank0.jsonl && fail "$name: the second step replay recorded a fast-forwarded step"
  local a b
  a=$(step_records s0/rank0.jsonl 5) b=$(step_records s3/rank0.jsonl 5)
  { [ -z "$a" ] || [ "$a" != "$b" ]; } && fail "$name: the second step replay's records differ from the first's"
  grep -q '"io":"state"' s3/rank0.jsonl || fail "$name: the second step replay recorded no state"
  cd "$WORK" || fail "cd"
}

check_program tinytrain fwd/layer.1 "$BUILD_ROOT/examples/tinytrain"
check_program ctrain fwd/layer.1 "$BUILD_ROOT/examples/ctrain" --chaos-seed 7
echo ok
