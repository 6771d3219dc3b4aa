#!/usr/bin/env bash
# Benchmark: total `dtrace bisect` wall time against one step replay of the same
# workload (issue 4 target: at most 10x), and the count of replays.
#
# For each planted switch: two minitrain runs (4 ranks, step level), then in
# one go, alternating: the one-step replay (DTRACE_REPLAY_STEP=0 at step level,
# what a single replay costs) and the whole bisect. Medians of REPEATS.
#   tools/bench/bisect.sh [BUILD_DIR] [REPEATS] [RANKS]     (defaults: build-release, 3, 4)
set -euo pipefail
. "$(dirname "$0")/release.sh"
release_build "${1:-build-release}"
build=$(cd "${1:-build-release}" && pwd)
repeats=${2:-3}
ranks=${3:-4}
minitrain="$build/tools/minitrain/minitrain"
dtrace="$build/dtrace"
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-bench-bisect.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"


printf '%-18s %12s %12s %8s %8s  %s\n' switch "replay (s)" "bisect (s)" ratio replays verdict
for switch in atomic-bias-grad splitk autotune fused-ce uninit-pad allreduce-arrival; do
  "$minitrain" --steps 4 --ranks "$ranks" --nondet "$switch" --chaos-seed 1 --out "$switch-a" >/dev/null
  "$minitrain" --steps 4 --ranks "$ranks" --nondet "$switch" --chaos-seed 2 --out "$switch-b" >/dev/null
  mapfile -t argv < <(head -n1 "$switch-a/rank0.jsonl" | jq -r '.replay.argv[]')
  replay_times=() bisect_times=()
  for ((i = 0; i < repeats; i++)); do
    rm -f one.jsonl
    t0=$(now)
    DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=step DTRACE_OUT=one.jsonl "${argv[@]}" >/dev/null
    t1=$(now)
    "$dtrace" bisect --trust --json "$switch-a" "$switch-b" >bisect.json 2>/dev/null || true
    t2=$(now)
    replay_times+=("$(echo "$t1 - $t0" | bc -l)")
    bisect_times+=("$(echo "$t2 - $t1" | bc -l)")
  done
  r=$(printf '%s\n' "${replay_times[@]}" | median)
  b=$(printf '%s\n' "${bisect_times[@]}" | median)
  printf '%-18s %12.3f %12.3f %7.1fx %8s  %s\n' "$switch" "$r" "$b" "$(echo "$b / $r" | bc -l)" \
    "$(jq '.replays | length' bisect.json)" "$(jq -r '.verdict + " " + (.culprit.op // "")' bisect.json)"
done
