#!/usr/bin/env bash
# Benchmark: what one bisect costs in launches of the workload and in wall time,
# with replay sessions (one launch per side, dtrace-replay/1.2, the default for
# a workload that serves them) and with a launch per replay (--launches), in
# one run, alternating (issues 30 and 41).
#
# Rows: minitrain (ranks as threads of one process), tinytrain (one rank) and
# the PyTorch example tools/torch/gpt_moe.py (one process per rank: 2 ranks
# through tools/torch/launch2.sh, the launcher its replays restart), at 1 and 2
# ranks, each started with a start-up delay standing in for what a cluster job
# pays per launch (a checkpoint of hundreds of GB, process-group set-up, NCCL):
# STARTUP_DELAY seconds (default 5; 0 measures the workloads as they are).
# Every bisect runs with --first (the first culprit only, as bisect did before
# issue 40's search), a baseline's too where its dtrace has --first (one that
# predates it names the first culprit only).
#
# Columns:
#   replay (s)   one step replay of the same run: one launch (start-up included)
#                of the recorded replay command at step level, measured in the
#                same run; ratio = bisect / it (issue 30's target: sessions
#                within 3x).
#   start-up (s) one start-up of the workload as a session: launched with
#                DTRACE_SESSION and its first request the end request, until it
#                exits (measured in the same run).
#   own (s)      the replays' own times, from the bisect's JSON
#                (.replays[].seconds), except each session's first request,
#                which holds the start-up it waited for (and, with both
#                sides starting at once, the other side's start-up contending
#                for the cores): it is counted as the first request's own
#                time measured alone, one session started with a layer-level
#                step replay as its first request and then the end request,
#                less one start-up (both medians, same run, same build's
#                workload); every other request and launch as its seconds.
#   /ideal       bisect / (start-up + own): issue 41's target is 1.3x for
#                sessions (one start-up and the replays, nothing more).
#   req/launch   a session's requests after its first against the launches of
#                the same replays (same index in the --launches bisect of the
#                same binary, same repetition); issue 41 asks <= 1.
# Medians of REPEATS (req/launch: of the repetitions' ratios).
#   tools/bench/bisect_sessions.sh [BUILD_DIR] [REPEATS] [--baseline OLD_BUILD_DIR] [--pairs | --startups]
#                (defaults: build-release, 1)
# --startups: instead of bisects, one side's session start-up (its first
# request the end request, until it exits) against both sides' at once, as a
# bisect starts them, alternating, REPEATS times: wall and CPU seconds (user +
# system of every process of the workload, /usr/bin/time): whether a second
# start-up at once costs waiting (hidden by the overlap) or CPU (issue 41).
# --pairs: instead of bisects, one stage's two replays (A's and B's step
# replays at layer level, each a launch) one after the other against both at
# once, alternating, REPEATS times: whether the two sides' replays of a stage
# could run together on this machine (issue 41).
#   WORKLOADS="minitrain tinytrain torch" RANKS="1 2" STARTUP_DELAY=5 MODES="sessions launches"
# --baseline: another build's dtrace (a release build of an older commit,
# e.g. in a git worktree) bisects too, alternating with this build's (modes
# base-sessions, base-launches); its minitrain and tinytrain record and serve
# its own runs when it has them (what a session costs on the workload's side
# is the recorder's, linked into them); the torch example runs this tree's
# Python package for both.
set -euo pipefail
. "$(dirname "$0")/release.sh"
source_root=$(cd "$(dirname "$0")/../.." && pwd)
positional=()
baseline=""
pairs=""
startups=""
while [ $# -gt 0 ]; do
  case "$1" in
    --baseline) baseline=$2; shift 2 ;;
    --pairs) pairs=1; shift ;;
    --startups) startups=1; shift ;;
    *) positional+=("$1"); shift ;;
  esac
done
set -- "${positional[@]}"
release_build "${1:-build-release}"
build=$(cd "${1:-build-release}" && pwd)
repeats=${2:-1}
delay=${STARTUP_DELAY:-5}
read -r -a workloads <<<"${WORKLOADS:-minitrain tinytrain torch}"
read -r -a rank_counts <<<"${RANKS:-1 2}"
read -r -a base_modes <<<"${MODES:-sessions launches}"
if [ -n "$baseline" ]; then
  [ -x "$baseline/dtrace" ] || { echo "bisect_sessions.sh: --baseline $baseline has no dtrace" >&2; exit 2; }
  [ "$(build_type "$baseline")" = release ] ||
    { echo "bisect_sessions.sh: --baseline $baseline is not a release build" >&2; exit 2; }
  baseline=$(cd "$baseline" && pwd)
  base_first=()
  ! "$baseline/dtrace" bisect --help | grep -- '--first' >/dev/null || base_first=(--first)
fi
modes=("${base_modes[@]}")
[ -z "$baseline" ] || for m in "${base_modes[@]}"; do modes+=("base-$m"); done
python=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-bench-sessions.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
export PYTHONPATH="$build/python"


# The build a mode's runs come from: base-* the baseline's where it has the workload.
build_of() {
  local mode=$1 workload=$2
  case "$mode" in
    base-*)
      case "$workload" in
        minitrain) [ -x "$baseline/tools/minitrain/minitrain" ] && { echo "$baseline"; return; } ;;
        tinytrain) [ -x "$baseline/examples/tinytrain" ] && { echo "$baseline"; return; } ;;
      esac ;;
  esac
  echo "$build"
}

# record WORKLOAD RANKS DIR SEED BUILD: one run, recorded at step level.
record() {
  local workload=$1 ranks=$2 dir=$3 seed=$4 from=$5
  case "$workload" in
    minitrain)
      "$from/tools/minitrain/minitrain" --steps 2 --ranks "$ranks" --nondet splitk --chaos-seed "$seed" \
        --startup-delay "$delay" --out "$dir" >/dev/null ;;
    tinytrain)
      # One rank; its planted matmul draws its order anew per process (no seed).
      "$from/examples/tinytrain" --steps 2 --out "$dir" --checkpoint-every 1 --checkpoint-dir "ck-$dir" \
        --startup-delay "$delay" --nondet >/dev/null ;;
    torch)
      local launcher=()
      [ "$ranks" = 1 ] || launcher=("$source_root/tools/torch/launch2.sh")
      DTRACE_TORCH_LAUNCHER="${launcher[*]}" "${launcher[@]}" "$python" "$source_root/tools/torch/gpt_moe.py" \
        --steps 2 --nondet combine --startup-delay "$delay" --run-dir "$dir" --checkpoint-dir "ck-$dir" \
        --checkpoint-every 1 >/dev/null 2>&1 ;;
  esac
}

# replay_command RUN: the run's replay argv (one a line) and cwd.
header() { head -n1 "$1/rank0.jsonl"; }

# Runs a-new and b-new of the workload with this tree's build, and the step
# they first differ at in $step: what the --pairs and --startups tables start from.
record_new_pair() {
  rm -rf a-new b-new ck-a-new ck-b-new
  record "$1" "$2" a-new 1 "$build"
  record "$1" "$2" b-new 2 "$build"
  step=$({ "$build/dtrace" diff --json a-new b-new || true; } | jq '.first.step')
}

# one_replay RUN STEP: one launch of the run's replay command at step level (the baseline).
one_replay() {
  local argv cwd
  mapfile -t argv < <(header "$1" | jq -r '.replay.argv[]')
  cwd=$(header "$1" | jq -r '.replay.cwd // "."')
  rm -rf one && mkdir one
  (cd "$cwd" && DTRACE_REPLAY_STEP=$2 DTRACE_LEVEL=step DTRACE_OUT_DIR="$work/one" \
    DTRACE_OUT="$work/one/replay.jsonl" "${argv[@]}" >/dev/null 2>&1)
}

# layer_replay RUN STEP DIR: one launch of the run's replay command at layer
# level, as a bisect's first stage asks it (its own output directory).
layer_replay() {
  local argv cwd
  mapfile -t argv < <(header "$1" | jq -r '.replay.argv[]')
  cwd=$(header "$1" | jq -r '.replay.cwd // "."')
  rm -rf "$3" && mkdir "$3"
  (cd "$cwd" && DTRACE_REPLAY_STEP=$2 DTRACE_LEVEL=layer DTRACE_OUT_DIR="$work/$3" \
    DTRACE_OUT="$work/$3/replay.jsonl" "${argv[@]}" >/dev/null 2>&1)
}

if [ -n "$pairs" ]; then
  printf '%-10s %5s %14s %14s %8s\n' workload ranks "sequential (s)" "concurrent (s)" ratio
  for workload in "${workloads[@]}"; do
    for ranks in "${rank_counts[@]}"; do
      [ "$workload" != tinytrain ] || [ "$ranks" = 1 ] || continue
      record_new_pair "$workload" "$ranks"
      seq_times="" con_times=""
      for ((i = 0; i < repeats; i++)); do
        t0=$(now)
        layer_replay a-new "$step" ra && layer_replay b-new "$step" rb
        seq_times+="$(echo "$(now) - $t0" | bc -l) "
        t0=$(now)
        layer_replay a-new "$step" ra & pa=$!
        layer_replay b-new "$step" rb & pb=$!
        wait "$pa" "$pb"
        con_times+="$(echo "$(now) - $t0" | bc -l) "
      done
      sq=$(printf '%s\n' $seq_times | median)
      cc=$(printf '%s\n' $con_times | median)
      printf '%-10s %5s %14.3f %14.3f %7.2fx\n' "$workload" "$ranks" "$sq" "$cc" "$(echo "$cc / $sq" | bc -l)"
    done
  done
  exit 0
fi

# one_startup RUN STEP [first]: the run's replay command started as a session
# whose first request is the end request (with "first": a layer-level replay
# of STEP, then the end request); prints the seconds until it exits.
one_startup() {
  local argv cwd t0 end=0
  mapfile -t argv < <(header "$1" | jq -r '.replay.argv[]')
  cwd=$(header "$1" | jq -r '.replay.cwd // "."')
  rm -rf session first-out && mkdir session first-out
  if [ "${3:-}" = first ]; then
    jq -nc --arg step "$2" --arg out "$work/first-out" '{request: 0, env: {DTRACE_REPLAY_STEP: $step,
      DTRACE_LEVEL: "layer", DTRACE_FAST_FORWARD: "step", DTRACE_OUT_DIR: $out, DTRACE_OUT: ($out + "/replay.jsonl")}}' \
      >session/request.0.json
    end=1
  fi
  echo "{\"request\":$end,\"end\":true}" >"session/request.$end.json"
  t0=$(now)
  (cd "$cwd" && DTRACE_SESSION="$work/session" DTRACE_REPLAY_STEP=$2 "${argv[@]}" >/dev/null 2>&1) || true
  echo "$(now) - $t0" | bc -l
}

# sessions_at_once STEP RUN...: each RUN's replay command started as a
# session whose first request is the end request, all at once, until all
# exit (timed by the caller with /usr/bin/time).
sessions_at_once() {
  local step=$1 run argv cwd pids=() k=0
  shift
  for run in "$@"; do
    mapfile -t argv < <(header "$run" | jq -r '.replay.argv[]')
    cwd=$(header "$run" | jq -r '.replay.cwd // "."')
    rm -rf "session-$k" && mkdir "session-$k"
    echo '{"request":0,"end":true}' >"session-$k/request.0.json"
    (cd "$cwd" && DTRACE_SESSION="$work/session-$k" DTRACE_REPLAY_STEP=$step "${argv[@]}" >/dev/null 2>&1 || true) &
    pids+=($!)
    k=$((k + 1))
  done
  wait "${pids[@]}"
}

if [ -n "$startups" ]; then
  printf '%-10s %5s %10s %10s %10s %10s %10s
' workload ranks "one (s)" "one cpu" "two (s)" "two cpu" "two/one"
  export -f sessions_at_once header
  export work
  for workload in "${workloads[@]}"; do
    for ranks in "${rank_counts[@]}"; do
      [ "$workload" != tinytrain ] || [ "$ranks" = 1 ] || continue
      record_new_pair "$workload" "$ranks"
      one="" one_cpu="" two="" two_cpu=""
      for ((i = 0; i < repeats; i++)); do
        read -r w u s < <({ /usr/bin/time -f '%e %U %S' bash -c 'sessions_at_once "$@"' _ "$step" a-new; } 2>&1 >/dev/null | tail -n1)
        one+="$w " one_cpu+="$(echo "$u + $s" | bc -l) "
        read -r w u s < <({ /usr/bin/time -f '%e %U %S' bash -c 'sessions_at_once "$@"' _ "$step" a-new b-new; } 2>&1 >/dev/null | tail -n1)
        two+="$w " two_cpu+="$(echo "$u + $s" | bc -l) "
      done
      o=$(printf '%s\n' $one | median) t=$(printf '%s\n' $two | median)
      printf '%-10s %5s %10.2f %10.2f %10.2f %10.2f %9.2fx\n' "$workload" "$ranks" "$o" "$(printf '%s\n' $one_cpu | median)" \
        "$t" "$(printf '%s\n' $two_cpu | median)" "$(echo "$t / $o" | bc -l)"
    done
  done
  exit 0
fi

# own JSON STARTUP [FIRST]: the replays' own seconds (see the header), each
# session's first request counted as FIRST when given.
own() {
  jq --argjson s "$2" --argjson f "${3:-null}" '
    [.replays[] | select(.via == "request")] as $req
    | (if $f != null then $f elif ($req | length) > 0 then ([.replays[0].seconds - $s, 0] | max) else 0 end) as $first
    | [foreach .replays[] as $r ({seen: {}};
        .out = (if $r.via == "request" and (.seen[($r.launch | tostring)] | not) then $first else $r.seconds end)
        | .seen[($r.launch | tostring)] = true;
        .out)] | add' "$1"
}

# req_launch SESSIONS_JSON LAUNCHES_JSON: a session's later requests against
# the launches of the same replays.
req_launch() {
  jq -n --slurpfile s "$1" --slurpfile l "$2" '
    [range(0; [$s[0].replays, $l[0].replays] | map(length) | min) as $i
     | select($s[0].replays[$i].via == "request")
     | select(([$s[0].replays[:$i][] | .launch] | index($s[0].replays[$i].launch)) != null)
     | [$s[0].replays[$i].seconds, $l[0].replays[$i].seconds]]
    | if length == 0 then "-" else ((map(.[0]) | add) / (map(.[1]) | add)) end'
}

printf '%-10s %5s %-14s %8s %8s %10s %8s %8s %7s %7s %10s %8s %7s  %s\n' workload ranks mode "replay" "start-up" \
  "bisect (s)" "ratio" "own (s)" "/ideal" "launch" "req/launch" "replays" "(req)" verdict
for workload in "${workloads[@]}"; do
  for ranks in "${rank_counts[@]}"; do
    [ "$workload" != tinytrain ] || [ "$ranks" = 1 ] || continue  # tinytrain runs one rank
    declare -A times=() owns=() ratios=() starts=() firsts=() replays=() recorded=()
    # Each build's own recordings (the baseline's workloads serve only theirs).
    for mode in "${modes[@]}"; do
      from=$(build_of "$mode" "$workload")
      tag=$([ "$from" = "$build" ] && echo new || echo base)
      [ -z "${recorded[$tag]:-}" ] || continue
      rm -rf "a-$tag" "b-$tag" "ck-a-$tag" "ck-b-$tag"
      record "$workload" "$ranks" "a-$tag" 1 "$from"
      record "$workload" "$ranks" "b-$tag" 2 "$from"
      recorded[$tag]=1
    done
    step=$({ "$build/dtrace" diff --json a-new b-new || true; } | jq '.first.step')
    for ((i = 0; i < repeats; i++)); do
      for tag in "${!recorded[@]}"; do
        t0=$(now)
        one_replay "a-$tag" "$step"
        replays[$tag]+="$(echo "$(now) - $t0" | bc -l) "
        starts[$tag]+="$(one_startup "a-$tag" "$step") "
        firsts[$tag]+="$(one_startup "a-$tag" "$step" first) "
      done
      for mode in "${modes[@]}"; do
        from=$(build_of "$mode" "$workload")
        tag=$([ "$from" = "$build" ] && echo new || echo base)
        flags=(--trust --json)
        case "$mode" in *launches) flags+=(--launches) ;; esac
        case "$mode" in
          base-*) dtrace="$baseline/dtrace" && flags+=("${base_first[@]}") ;;
          *) dtrace="$build/dtrace" && flags+=(--first) ;;
        esac
        t0=$(now)
        "$dtrace" bisect "${flags[@]}" "a-$tag" "b-$tag" >"bisect-$mode-$i.json" 2>/dev/null || true
        times[$mode]+="$(echo "$(now) - $t0" | bc -l) "
      done
    done
    for mode in "${modes[@]}"; do
      from=$(build_of "$mode" "$workload")
      tag=$([ "$from" = "$build" ] && echo new || echo base)
      r=$(printf '%s\n' ${replays[$tag]} | median)
      s=$(printf '%s\n' ${starts[$tag]} | median)
      b=$(printf '%s\n' ${times[$mode]} | median)
      own_list="" rl_list=""
      # A session's first request alone, less the start-up (see the header).
      first=$(echo "$(printf '%s\n' ${firsts[$tag]} | median) - $s" | bc -l)
      first=$(echo "if ($first < 0) 0 else $first" | bc -l)
      for ((i = 0; i < repeats; i++)); do
        own_list+="$(own "bisect-$mode-$i.json" "$s" "$first") "
        case "$mode" in
          *sessions)
            other="bisect-${mode%sessions}launches-$i.json"
            [ -f "$other" ] && rl_list+="$(req_launch "bisect-$mode-$i.json" "$other") " ;;
        esac
      done
      o=$(printf '%s\n' $own_list | median)
      rl=$([ -n "$rl_list" ] && printf '%s\n' $rl_list | grep -v -- - | median || echo "")
      j="bisect-$mode-$((repeats - 1)).json"
      printf '%-10s %5s %-14s %8.2f %8.2f %10.2f %7.1fx %8.2f %6.2fx %7s %10s %8s %7s  %s\n' "$workload" "$ranks" \
        "$mode/$(jq -r '.replay_mode' "$j")" "$r" "$s" "$b" "$(echo "$b / $r" | bc -l)" "$o" \
        "$(echo "$b / ($s + $o)" | bc -l)" "$(jq '.launches | length' "$j")" "${rl:+$(printf '%.2fx' "$rl")}" \
        "$(jq '.replays | length' "$j")" "$(jq '[.replays[] | select(.via == "request")] | length' "$j")" \
        "$(jq -r '.verdict + " " + (.culprit.op // "")' "$j")"
    done
    unset times owns ratios starts firsts replays recorded
  done
done
