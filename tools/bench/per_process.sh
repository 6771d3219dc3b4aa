#!/usr/bin/env bash
# How often `dtrace bisect --trust` names a choice made once per process
# (issue 12): minitrain's autotune switch with its chaos unpinned, so every
# process, each replay included, picks the lm-head configuration on its own.
# For each rank count: two runs that differ (B is recorded again until
# `dtrace diff` finds a divergence), then TRIES bisects with the default
# --repeat; counts the verdicts, how many named the planted kernel, and how
# many needed the per-process search (an attempt whose replays agreed).
#   tools/bench/per_process.sh [BUILD_DIR] [TRIES]   (defaults: build-release, 20; RANKS="1 4")
# Its figures are counts, not times, so a BUILD_DIR of another build type is
# measured too (the build type is printed; the seconds then say little).
set -euo pipefail
. "$(dirname "$0")/release.sh"
if [ -n "${1:-}" ]; then
  meson compile -C "$1" dtrace tools/minitrain/minitrain >/dev/null
else
  release_build build-release dtrace tools/minitrain/minitrain
fi
build=$(cd "${1:-build-release}" && pwd)
echo "build: $build ($(build_type "$build"))"
tries=${2:-20}
read -r -a rank_counts <<<"${RANKS:-1 4}"
minitrain="$build/tools/minitrain/minitrain"
dtrace="$build/dtrace"
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-bench-per-process.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"
planted() { "$minitrain" --print-planted autotune | jq -r ".$1"; }
op=$(planted op)
scope=$(planted scope)

printf '%-6s %6s %7s %10s %14s %9s %s\n' ranks tries named "not named" "per-process" seconds verdicts
for ranks in "${rank_counts[@]}"; do
  rm -rf a b
  "$minitrain" --steps 2 --ranks "$ranks" --level step --nondet autotune --out a >/dev/null
  for ((i = 0; i < 30; i++)); do
    rm -rf b
    "$minitrain" --steps 2 --ranks "$ranks" --level step --nondet autotune --out b >/dev/null
    code=0
    "$dtrace" diff a b >/dev/null 2>&1 || code=$?
    [ "$code" = 1 ] && break
  done
  [ "$code" = 1 ] || { echo "per_process.sh: 30 runs at $ranks ranks all picked like run a" >&2; exit 2; }
  named=0 per_process=0 verdicts=()
  t0=$(date +%s.%N)
  for ((i = 0; i < tries; i++)); do
    "$dtrace" bisect --trust --json a b >out.json 2>/dev/null || true
    read -r verdict got_op got_scope outcomes < <(jq -r '[.verdict, (.culprit.op // "-"), (.culprit.scope // "-"),
      (if .outcomes then "yes" else "no" end)] | @tsv' out.json)
    verdicts+=("$verdict")
    [ "$verdict" = named ] && [ "$got_op" = "$op" ] && [ "$got_scope" = "$scope" ] && named=$((named + 1))
    [ "$outcomes" = yes ] && per_process=$((per_process + 1))
  done
  seconds=$(echo "$(date +%s.%N) - $t0" | bc)
  summary=$(printf '%s\n' "${verdicts[@]}" | sort | uniq -c | awk '{printf "%s%s x%s", (NR > 1 ? ", " : ""), $2, $1}')
  printf '%-6s %6s %7s %10s %14s %9.0f %s\n' "$ranks" "$tries" "$named" $((tries - named)) "$per_process" \
    "$seconds" "$summary"
done
