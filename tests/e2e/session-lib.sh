# shellcheck shell=bash
# A replay session (dtrace-replay/1.2, dtrace-fp(5) "Replay sessions") driven
# by hand, as dtrace's runner drives one: request files renamed into place,
# each answer awaited until every rank's status says done. Sourced by the
# tests of the workloads that serve sessions; needs jq, $WORK and fail().

# session_start DIR STEP ARGV...: starts ARGV serving a session in DIR (created)
# that replays STEP; its pid in SESSION_PID, its output in DIR.out and DIR.err.
session_start() {
  SESSION_DIR=$1 SESSION_STEP=$2; shift 2
  mkdir -p "$SESSION_DIR"
  env -u DTRACE_OUT -u DTRACE_OUT_DIR DTRACE_SESSION="$SESSION_DIR" DTRACE_REPLAY_STEP="$SESSION_STEP" \
    "$@" >"$SESSION_DIR.out" 2>"$SESSION_DIR.err" &
  SESSION_PID=$!
}

# session_vars OUT_DIR NAME=VALUE...: a request's env as JSON: the session's
# step, OUT_DIR (absolute) and its replay.jsonl, and the variables given.
session_vars() {
  local dir=$1; shift
  printf '%s\n' "DTRACE_REPLAY_STEP=$SESSION_STEP" "DTRACE_OUT_DIR=$dir" "DTRACE_OUT=$dir/replay.jsonl" "$@" |
    jq -Rn '[inputs | capture("^(?<key>[^=]+)=(?<value>.*)$")] | from_entries'
}

# session_request K ENV_JSON: request K, written under another name, then renamed.
session_request() {
  jq -cn --argjson k "$1" --argjson env "$2" '{request: $k, env: $env}' >"$SESSION_DIR/.request.$1"
  mv "$SESSION_DIR/.request.$1" "$SESSION_DIR/request.$1.json"
}

# session_answered OUT_DIR RANKS: waits (60 s at most) until ranks 0..RANKS-1
# say done in OUT_DIR; fails when the session's process ends first.
session_answered() {
  local dir=$1 ranks=$2 i r all
  for ((i = 0; i < 6000; i++)); do
    all=1
    for ((r = 0; r < ranks; r++)); do grep -qs '^done ' "$dir/rank$r.status" || all=0; done
    [ "$all" = 1 ] && return 0
    kill -0 "$SESSION_PID" 2>/dev/null ||
      fail "the session ended while answering $dir: $(cat "$dir"/rank*.status 2>/dev/null) $(tail -n3 "$SESSION_DIR.err")"
    sleep 0.01
  done
  fail "no answer in $dir after 60 s: $(cat "$dir"/rank*.status 2>/dev/null)"
}

# session_serve K OUT_DIR RANKS NAME=VALUE...: request K into OUT_DIR, answered.
session_serve() {
  local k=$1 dir=$2 ranks=$3; shift 3
  session_request "$k" "$(session_vars "$dir" "$@")"
  session_answered "$dir" "$ranks"
}

# session_end K: the end request; the process must exit 0 within 10 s.
session_end() {
  local i got=0
  jq -cn --argjson k "$1" '{request: $k, end: true}' >"$SESSION_DIR/.end"
  mv "$SESSION_DIR/.end" "$SESSION_DIR/request.$1.json"
  for ((i = 0; i < 1000; i++)); do kill -0 "$SESSION_PID" 2>/dev/null || break; sleep 0.01; done
  wait "$SESSION_PID" || got=$?
  [ "$got" = 0 ] || fail "the session exited $got after the end request: $(tail -n5 "$SESSION_DIR.err")"
}

# session_repeats_launch STEP RANKS ARGV...: ARGV serving a session, two
# layer-level step replays of STEP in it, and a launch of the same replay: the
# three record the same (dtrace diff: identical over STEP). The second request
# starts from the copy of the step's start the first kept, not from what the
# first's step left (its optimizer update, its data position); an answer
# equal to a launch is one a launch would give.
session_repeats_launch() {
  local step=$1 ranks=$2 pair; shift 2
  mkdir -p "$WORK/s0" "$WORK/s1" "$WORK/l0"
  session_start "$WORK/session" "$step" "$@"
  session_serve 0 "$WORK/s0" "$ranks" DTRACE_LEVEL=layer
  session_serve 1 "$WORK/s1" "$ranks" DTRACE_LEVEL=layer
  session_end 2
  DTRACE_REPLAY_STEP=$step DTRACE_LEVEL=layer DTRACE_OUT_DIR="$WORK/l0" DTRACE_OUT="$WORK/l0/replay.jsonl" "$@" \
    >/dev/null 2>"$WORK/launch.err" || { cat "$WORK/launch.err" >&2; fail "the launch of the same replay"; }
  for pair in "s0 s1" "s0 l0"; do
    set -- $pair
    run_dtrace 0 diff --steps "$step-$step" "$WORK/$1" "$WORK/$2"
    grep -q identical "$OUT" || fail "$1 and $2 differ"
  done
}

# step_records LOG STEP: the compared records of STEP (no timing, no seq or line).
step_records() {
  grep -v '"io":"timing"' "$1" | grep '"scope"' | jq -c --argjson s "$2" 'select(.step == $s) | del(.seq, .line, .value)'
}
