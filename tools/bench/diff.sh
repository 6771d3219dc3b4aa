#!/usr/bin/env bash
# Benchmark: `dtrace diff` against `cmp` over the same file pairs (issue 2).
#
# Generates (once, cached in $WORK) two identical layer-level runs of about
# 500 MB each, 8 rank files, plus a third with one divergence late in the run;
# warms the page cache; then times, in one go and alternating, `cmp` over the
# eight file pairs, `dtrace diff`, and for context a plain Python json.loads
# pass over the same files. Reports medians and the ratio dtrace/cmp, peak RSS,
# and checks that the late divergence is found.
#
#   tools/bench/diff.sh [BUILD_DIR] [REPEATS]      (defaults: build-release, 5)
set -euo pipefail
build=${1:-build-release}
. "$(dirname "$0")/release.sh"
release_build "$build"
repeats=${2:-5}
work=${WORK:-/tmp/dtrace-bench-diff}
dtrace="$build/dtrace"
make_run="$build/tools/bench/make_run"
steps=${STEPS:-1400}

mkdir -p "$work"
if [ ! -f "$work/.done-$steps" ]; then
  rm -rf "$work"/a "$work"/b "$work"/c
  "$make_run" "$work/a" --ranks 8 --steps "$steps"
  "$make_run" "$work/b" --ranks 8 --steps "$steps"
  "$make_run" "$work/c" --ranks 8 --steps "$steps" --diverge $((steps - 100)):5:200
  touch "$work/.done-$steps"
fi
cat "$work"/a/* "$work"/b/* >/dev/null  # page cache warm

now() { date +%s.%N; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }

cmp_times=() dtrace_times=()
for ((i = 0; i < repeats; i++)); do
  t0=$(now)
  for r in 0 1 2 3 4 5 6 7; do cmp "$work/a/rank$r.jsonl" "$work/b/rank$r.jsonl"; done
  t1=$(now)
  "$dtrace" diff "$work/a" "$work/b" >/dev/null
  t2=$(now)
  cmp_times+=("$(echo "$t1 - $t0" | bc -l)")
  dtrace_times+=("$(echo "$t2 - $t1" | bc -l)")
done
cmp_med=$(printf '%s\n' "${cmp_times[@]}" | median)
dtrace_med=$(printf '%s\n' "${dtrace_times[@]}" | median)
rss_kb=$(/usr/bin/time -f '%M' "$dtrace" diff "$work/a" "$work/b" 2>&1 >/dev/null | tail -1)
t0=$(now)
python3 - "$work/a" "$work/b" <<'PY'
import json, os, sys
n = 0
for run in sys.argv[1:]:
    for f in sorted(os.listdir(run)):
        with open(os.path.join(run, f)) as fh:
            for line in fh:
                json.loads(line); n += 1
PY
t1=$(now)
python_s=$(echo "$t1 - $t0" | bc -l)
set +e
late=$("$dtrace" diff --json "$work/a" "$work/c" | python3 -c 'import json,sys; f=json.load(sys.stdin)["first"]; print(f["step"], f["rank"], f["seq"])')
set -e
bytes=$(du -cb "$work"/a/*.jsonl "$work"/b/*.jsonl | tail -1 | cut -f1)

printf '\n%-34s %10s\n' "measure (median of $repeats)" "value"
printf '%-34s %10.3f s\n' "cmp, 8 file pairs" "$cmp_med"
printf '%-34s %10.3f s\n' "dtrace diff" "$dtrace_med"
printf '%-34s %10.2f x\n' "dtrace / cmp" "$(echo "$dtrace_med / $cmp_med" | bc -l)"
printf '%-34s %10.0f MB/s\n' "dtrace throughput (both runs)" "$(echo "$bytes / $dtrace_med / 1000000" | bc -l)"
printf '%-34s %10.1f MiB\n' "dtrace peak RSS" "$(echo "$rss_kb / 1024" | bc -l)"
printf '%-34s %10.3f s\n' "python json.loads, once" "$python_s"
printf '%-34s %10s\n' "late divergence found at" "step $(echo "$late" | cut -d' ' -f1) rank $(echo "$late" | cut -d' ' -f2)"
printf '%-34s %10s\n' "expected" "step $((steps - 100)) rank 5"
