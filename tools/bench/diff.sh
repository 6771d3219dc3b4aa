#!/usr/bin/env bash
# Benchmark: `dtrace diff` against `cmp` over the same file pairs (issues 2, 12).
#
# Two shapes of run, each about 480 MB in 8 rank files, generated once by
# make_run and cached in $WORK:
#   layer  1,400 steps of 289 records (a layer-level run: the cost per byte)
#   small  24,000 steps of 18 records (a long step-level run: a loss and a few
#          layers; the cost per step)
#   timing the small shape with a step_seconds timing record in each step whose
#          value differs between a and b (as in two real runs of one job);
#          cmp stops at the first such record, so its time there is no
#          baseline: compare with the small shape's cmp (same bytes)
# For each shape: two identical runs plus a third with one divergence late in
# the run; page cache warmed; then, alternating in one go, `cmp` over the eight
# file pairs and `dtrace diff`. Reports medians, the ratio dtrace/cmp (target
# <= 1.5), peak RSS, and checks that the late divergence is found (on a busy
# machine, compare binaries by CPU time instead: tools/bench/diff_cpu.sh). PYTHON=1 adds
# a plain Python json.loads pass over the layer runs, for context.
#
#   tools/bench/diff.sh [BUILD_DIR] [REPEATS]      (defaults: build-release, 5)
#   SHAPES="layer small timing" STEPS=1400 SMALL_STEPS=24000 WORK=/tmp/dtrace-bench-diff
set -euo pipefail
build=${1:-build-release}
. "$(dirname "$0")/release.sh"
release_build "$build" ./dtrace:executable tools/bench/make_run
repeats=${2:-5}
work=${WORK:-/tmp/dtrace-bench-diff}
dtrace="$build/dtrace"
make_run="$build/tools/bench/make_run"
shapes=${SHAPES:-layer small}


# bench SHAPE STEPS DIVERGE_SEQ [make_run options...]
bench() {
  local shape=$1 steps=$2 div_seq=$3
  shift 3
  local dir="$work/$shape-$steps"
  mkdir -p "$dir"
  if [ ! -f "$dir/.done" ]; then
    rm -rf "$dir"/a "$dir"/b "$dir"/c
    # Timing records (shape timing): run a gets one salt, b and c another.
    local salt_a=() salt_b=()
    [ "$shape" = timing ] && salt_a=(--timing 1) && salt_b=(--timing 2)
    "$make_run" "$dir/a" --ranks 8 --steps "$steps" "$@" "${salt_a[@]}"
    "$make_run" "$dir/b" --ranks 8 --steps "$steps" "$@" "${salt_b[@]}"
    "$make_run" "$dir/c" --ranks 8 --steps "$steps" "$@" "${salt_b[@]}" --diverge $((steps - 100)):5:"$div_seq"
    touch "$dir/.done"
  fi
  cat "$dir"/a/* "$dir"/b/* >/dev/null  # page cache warm

  local cmp_times=() dtrace_times=() t0 t1 t2
  for ((i = 0; i < repeats; i++)); do
    t0=$(now)
    # The timing shape's runs differ in every step: cmp stops there (status 1).
    for r in 0 1 2 3 4 5 6 7; do cmp "$dir/a/rank$r.jsonl" "$dir/b/rank$r.jsonl" >/dev/null || [ "$shape" = timing ]; done
    t1=$(now)
    "$dtrace" diff "$dir/a" "$dir/b" >/dev/null
    t2=$(now)
    cmp_times+=("$(echo "$t1 - $t0" | bc -l)")
    dtrace_times+=("$(echo "$t2 - $t1" | bc -l)")
  done
  local cmp_med dtrace_med rss_kb late bytes records
  cmp_med=$(printf '%s\n' "${cmp_times[@]}" | median)
  dtrace_med=$(printf '%s\n' "${dtrace_times[@]}" | median)
  rss_kb=$(/usr/bin/time -f '%M' "$dtrace" diff "$dir/a" "$dir/b" 2>&1 >/dev/null | tail -1)
  set +e
  late=$("$dtrace" diff --json "$dir/a" "$dir/c" | python3 -c 'import json,sys; f=json.load(sys.stdin)["first"]; print(f["step"], f["rank"], f["seq"])')
  set -e
  records=$("$dtrace" diff --json "$dir/a" "$dir/b" | python3 -c 'import json,sys; print(json.load(sys.stdin)["compared"]["records"])')
  bytes=$(du -cb "$dir"/a/*.jsonl "$dir"/b/*.jsonl | tail -1 | cut -f1)

  printf '\n%s: %s steps x 8 ranks, %.0f MB per run, %s records compared\n' "$shape" "$steps" \
    "$(echo "$bytes / 2000000" | bc -l)" "$records"
  printf '%-34s %10s\n' "measure (median of $repeats)" "value"
  printf '%-34s %10.3f s\n' "cmp, 8 file pairs" "$cmp_med"
  printf '%-34s %10.3f s\n' "dtrace diff" "$dtrace_med"
  if [ "$shape" = timing ]; then
    # cmp's time here is to the first timing record: the baseline is the
    # small shape's cmp, the same bytes, when it ran before in this run.
    if [ -n "${small_cmp_med:-}" ]; then
      printf '%-34s %10.2f x\n' "dtrace / cmp of shape small" "$(echo "$dtrace_med / $small_cmp_med" | bc -l)"
    fi
  else
    printf '%-34s %10.2f x\n' "dtrace / cmp" "$(echo "$dtrace_med / $cmp_med" | bc -l)"
  fi
  [ "$shape" = small ] && small_cmp_med=$cmp_med
  printf '%-34s %10.0f MB/s\n' "dtrace throughput (both runs)" "$(echo "$bytes / $dtrace_med / 1000000" | bc -l)"
  printf '%-34s %10.1f MiB\n' "dtrace peak RSS" "$(echo "$rss_kb / 1024" | bc -l)"
  printf '%-34s %10s\n' "late divergence found at" "step $(echo "$late" | cut -d' ' -f1) rank $(echo "$late" | cut -d' ' -f2)"
  printf '%-34s %10s\n' "expected" "step $((steps - 100)) rank 5"

  if [ "${PYTHON:-0}" = 1 ] && [ "$shape" = layer ]; then
    t0=$(now)
    python3 - "$dir/a" "$dir/b" <<'PY'
import json, os, sys
for run in sys.argv[1:]:
    for f in sorted(os.listdir(run)):
        with open(os.path.join(run, f)) as fh:
            for line in fh:
                json.loads(line)
PY
    t1=$(now)
    printf '%-34s %10.3f s\n' "python json.loads, once" "$(echo "$t1 - $t0" | bc -l)"
  fi
}

echo "$(date -u +%FT%TZ) $(uptime)"
for shape in $shapes; do
  case $shape in
    layer) bench layer "${STEPS:-1400}" 200 ;;
    small) bench small "${SMALL_STEPS:-24000}" 10 --records 18 ;;
    timing) bench timing "${SMALL_STEPS:-24000}" 10 --records 18 ;;
    *) echo "diff.sh: unknown shape $shape (layer, small, timing)" >&2; exit 2 ;;
  esac
done
echo "$(date -u +%FT%TZ) $(uptime)"
