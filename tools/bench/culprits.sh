#!/usr/bin/env bash
# Benchmark: what every culprit costs (issue 40). One bisect of two runs with
# one or two planted nondeterministic ops, with the culprit search (the
# default) and with --first (the baseline, measured in the same run: what
# bisect cost before it searched for more), with replay sessions and with a
# launch per replay (--launches), alternating.
#
# Rows: tinytrain (C++; two plants in one chain, layer.0 feeding layer.1),
# ctrain (the C API; a forward gemm and a backward weight gradient) and
# minitrain (its own plants: MINITRAIN_ONE and MINITRAIN_TWO, --nondet lists),
# each with a start-up delay standing in for what a cluster job pays per
# launch (STARTUP_DELAY seconds, default 2; tinytrain and minitrain only,
# ctrain has none). Columns: plants, mode, the --first bisect (s), the full
# bisect (s), their ratio, the replays of each, the extra replays and seconds
# per extra culprit (with one plant: the cost of the search's ending, the
# pinned attempts that find nothing else), the culprits named, how the search
# ended. Medians of REPEATS.
#   tools/bench/culprits.sh [BUILD_DIR] [REPEATS]   (defaults: build-release, 1)
#   WORKLOADS="tinytrain ctrain minitrain" STARTUP_DELAY=2
set -euo pipefail
. "$(dirname "$0")/release.sh"
release_build "${1:-build-release}"
build=$(cd "${1:-build-release}" && pwd)
repeats=${2:-1}
delay=${STARTUP_DELAY:-2}
read -r -a workloads <<<"${WORKLOADS:-tinytrain ctrain minitrain}"
dtrace="$build/dtrace"
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-bench-culprits.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"


# record WORKLOAD PLANTS DIR SEED: one run of 2 steps, a checkpoint at each.
record() {
  local workload=$1 plants=$2 dir=$3 seed=$4
  case "$workload" in
    tinytrain)
      local which=(--nondet) && [ "$plants" = 2 ] && which=(--nondet layer.0,layer.1)
      "$build/examples/tinytrain" --steps 2 --out "$dir" --checkpoint-every 1 --checkpoint-dir "ck-$dir" \
        --startup-delay "$delay" "${which[@]}" >/dev/null ;;
    ctrain)
      local which=(--planted) && [ "$plants" = 2 ] && which=(--planted gemm,wgrad)
      "$build/examples/ctrain" --steps 2 --out "$dir" --checkpoint-every 1 --checkpoint-dir "ck-$dir" \
        --chaos-seed "$seed" "${which[@]}" >/dev/null ;;
    minitrain)
      local which=${MINITRAIN_ONE:-splitk} && [ "$plants" = 2 ] && which=${MINITRAIN_TWO:-splitk,atomic-bias-grad}
      "$build/tools/minitrain/minitrain" --steps 2 --nondet "$which" --chaos-seed "$seed" \
        --startup-delay "$delay" --out "$dir" >/dev/null ;;
  esac
}

printf '%-9s %6s %-9s %10s %10s %6s %8s %8s %14s %8s  %s\n' workload plants mode "first (s)" "all (s)" ratio \
  "replays" "(first)" "per culprit" culprits "search"
for workload in "${workloads[@]}"; do
  for plants in 1 2; do
    rm -rf a b ck-a ck-b
    record "$workload" "$plants" a 1
    record "$workload" "$plants" b 2
    declare -A times=()
    for ((i = 0; i < repeats; i++)); do
      for mode in sessions launches; do
        for search in first all; do
          flags=(--trust --json --step 0 --rank 0)
          [ "$mode" = sessions ] || flags+=(--launches)
          [ "$search" = all ] || flags+=(--first)
          t0=$(now)
          "$dtrace" bisect "${flags[@]}" a b >"bisect-$mode-$search.json" 2>/dev/null || true
          times[$mode-$search]+="$(echo "$(now) - $t0" | bc -l) "
        done
      done
    done
    for mode in sessions launches; do
      f=$(printf '%s\n' ${times[$mode-first]} | median)
      a=$(printf '%s\n' ${times[$mode-all]} | median)
      jf="bisect-$mode-first.json" ja="bisect-$mode-all.json"
      rf=$(jq '.replays | length' "$jf") ra=$(jq '.replays | length' "$ja")
      named=$(jq '.culprits | length' "$ja")
      extra=$((named > 1 ? named - 1 : 1))
      per=$(printf '%d, %.2f s' "$(((ra - rf) / extra))" "$(echo "($a - $f) / $extra" | bc -l)")
      printf '%-9s %6s %-9s %10.2f %10.2f %5.2fx %8s %8s %14s %8s  %s\n' "$workload" "$plants" "$mode" "$f" "$a" \
        "$(echo "$a / $f" | bc -l)" "$ra" "$rf" "$per" "$named" "$(jq -r '.search.stop // "-"' "$ja")"
    done
    unset times
  done
done
