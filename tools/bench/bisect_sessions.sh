#!/usr/bin/env bash
# Benchmark: what one bisect costs in launches of the workload and in wall time,
# with replay sessions (one launch per side, dtrace-replay/1.2, the default for
# a workload that serves them) and with a launch per replay (--launches), in
# one run, alternating (issue 30).
#
# Rows: minitrain (ranks as threads of one process) and the PyTorch example
# tools/torch/gpt_moe.py (one process per rank: 2 ranks through
# tools/torch/launch2.sh, the launcher its replays restart), at 1 and 2 ranks,
# each started with a start-up delay standing in for what a cluster job pays
# per launch (a checkpoint of hundreds of GB, process-group set-up, NCCL):
# STARTUP_DELAY seconds (default 5; 0 measures the workloads as they are).
# Baseline, measured in the same run: one step replay of the same run, which
# is one launch (start-up included) of the recorded replay command at step level.
# Columns: the baseline (s), the bisect (s), their ratio (issue 30's target:
# sessions within 3x), launches, replays (requests or launches), the verdict.
# Medians of REPEATS.
#   tools/bench/bisect_sessions.sh [BUILD_DIR] [REPEATS]   (defaults: build-release, 1)
#   WORKLOADS="minitrain torch" RANKS="1 2" STARTUP_DELAY=5
set -euo pipefail
. "$(dirname "$0")/release.sh"
source_root=$(cd "$(dirname "$0")/../.." && pwd)
release_build "${1:-build-release}"
build=$(cd "${1:-build-release}" && pwd)
repeats=${2:-1}
delay=${STARTUP_DELAY:-5}
read -r -a workloads <<<"${WORKLOADS:-minitrain torch}"
read -r -a rank_counts <<<"${RANKS:-1 2}"
minitrain="$build/tools/minitrain/minitrain"
dtrace="$build/dtrace"
python=${PYTHON:-/usr/bin/python3}
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-bench-sessions.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
export PYTHONPATH="$build/python"


# record WORKLOAD RANKS DIR SEED: one run, recorded at step level.
record() {
  local workload=$1 ranks=$2 dir=$3 seed=$4
  case "$workload" in
    minitrain)
      "$minitrain" --steps 2 --ranks "$ranks" --nondet splitk --chaos-seed "$seed" --startup-delay "$delay" \
        --out "$dir" >/dev/null ;;
    torch)
      local launcher=()
      [ "$ranks" = 1 ] || launcher=("$source_root/tools/torch/launch2.sh")
      DTRACE_TORCH_LAUNCHER="${launcher[*]}" "${launcher[@]}" "$python" "$source_root/tools/torch/gpt_moe.py" \
        --steps 2 --nondet combine --startup-delay "$delay" --run-dir "$dir" --checkpoint-dir "ck-$dir" \
        --checkpoint-every 1 >/dev/null 2>&1 ;;
  esac
}

# one_replay RUN STEP: one launch of the run's replay command at step level (the baseline).
one_replay() {
  local argv cwd
  mapfile -t argv < <(head -n1 "$1/rank0.jsonl" | jq -r '.replay.argv[]')
  cwd=$(head -n1 "$1/rank0.jsonl" | jq -r '.replay.cwd // "."')
  rm -rf one && mkdir one
  (cd "$cwd" && DTRACE_REPLAY_STEP=$2 DTRACE_LEVEL=step DTRACE_OUT_DIR="$work/one" \
    DTRACE_OUT="$work/one/replay.jsonl" "${argv[@]}" >/dev/null 2>&1)
}

printf '%-10s %5s %-9s %10s %10s %7s %9s %8s  %s\n' workload ranks mode "replay (s)" "bisect (s)" ratio launches replays verdict
for workload in "${workloads[@]}"; do
  for ranks in "${rank_counts[@]}"; do
    rm -rf a b ck-a ck-b
    record "$workload" "$ranks" a 1
    record "$workload" "$ranks" b 2
    step=$({ "$dtrace" diff --json a b || true; } | jq '.first.step')
    declare -A times=() counts=()
    replay_times=()
    for ((i = 0; i < repeats; i++)); do
      t0=$(now)
      one_replay a "$step"
      replay_times+=("$(echo "$(now) - $t0" | bc -l)")
      for mode in sessions launches; do
        flags=()
        [ "$mode" = sessions ] || flags=(--launches)
        t0=$(now)
        "$dtrace" bisect --trust --json "${flags[@]}" a b >"bisect-$mode.json" 2>/dev/null || true
        times[$mode]+="$(echo "$(now) - $t0" | bc -l) "
      done
    done
    r=$(printf '%s\n' "${replay_times[@]}" | median)
    for mode in sessions launches; do
      b=$(printf '%s\n' ${times[$mode]} | median)
      j="bisect-$mode.json"
      printf '%-10s %5s %-9s %10.2f %10.2f %6.1fx %9s %8s  %s\n' "$workload" "$ranks" \
        "$(jq -r '.replay_mode' "$j")" "$r" "$b" "$(echo "$b / $r" | bc -l)" "$(jq '.launches | length' "$j")" \
        "$(jq '.replays | length' "$j")" "$(jq -r '.verdict + " " + (.culprit.op // "")' "$j")"
    done
    unset times counts
  done
done
