#!/usr/bin/env bash
# Benchmark: `dtrace diff` of many small rank files against `cat` of the same
# files, in wall time and in system calls (issue 41, part 4).
#
# Two layer-level runs of RANKS rank files (default 4,096), 20 steps, one
# layer, written by make_run --undeclared (no rank in the headers, so the
# search diff does not apply and the streaming diff reads every file; the byte
# stage finds the steps both runs wrote alike); run B is A's files but one,
# whose step 15 differs at seq 5 (a planted divergence, checked in every
# diff's report). The page cache is warmed once; then each repetition runs, in
# turn, `cat` of both runs' files to /dev/null (the baseline: what reading
# them costs), this build's `dtrace diff --json`, and with --baseline the
# other dtrace (an older build) on the same runs. Reported: the median wall
# time of each over REPEATS and its ratio to cat's median, then the system
# calls of one run of each under `strace -f -c` (the calls that differ per
# file: open, close, reads, mappings, stats; and all calls). --stream passes
# --stream to both diffs (no search: the runs carry no chains, so it only
# skips the search's look at each run's first file).
#
#   tools/bench/many_files.sh [BUILD_DIR] [--ranks N] [--repeats N] [--baseline OLD_DTRACE] [--stream]
#                                      (defaults: build-release, 4096, 5, none)
#   WORK=dir KEEP=1 (keep the generated runs there)
set -euo pipefail
build=build-release
ranks=4096
repeats=5
baseline=""
diff_args=(diff --json)
while [ $# -gt 0 ]; do
  case "$1" in
    --ranks) ranks=$2; shift 2 ;;
    --repeats) repeats=$2; shift 2 ;;
    --baseline) baseline=$2; shift 2 ;;
    --stream) diff_args+=(--stream); shift ;;
    -*) echo "many_files.sh: unknown option $1" >&2; exit 2 ;;
    *) build=$1; shift ;;
  esac
done
. "$(dirname "$0")/release.sh"
release_build "$build" ./dtrace:executable tools/bench/make_run
build=$(cd "$build" && pwd)  # the runs are diffed from their directory
dtrace="$build/dtrace"
make_run="$build/tools/bench/make_run"
if [ -n "$baseline" ]; then
  [ -x "$baseline" ] || { echo "many_files.sh: --baseline $baseline is not a program" >&2; exit 2; }
  baseline=$(cd "$(dirname "$baseline")" && pwd)/$(basename "$baseline")
fi
command -v strace >/dev/null || { echo "many_files.sh: strace is needed (apt-get install strace)" >&2; exit 2; }
[ "$ranks" -ge 2 ] 2>/dev/null || { echo "many_files.sh: --ranks needs a number >= 2" >&2; exit 2; }
steps=20
div_step=15
div_rank=$((ranks / 2 + 1))
if [ -n "${WORK:-}" ]; then
  work=$WORK/$ranks
  mkdir -p "$work"
else
  work=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-bench-many-files.XXXXXX")
fi
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT

if [ ! -f "$work/.done" ]; then
  rm -rf "$work/a" "$work/b"
  args=(--ranks "$ranks" --steps $steps --layers 1 --undeclared)
  "$make_run" "$work/a" "${args[@]}"
  # make_run writes each rank's file from its arguments and rank alone: B is
  # A's files but the diverged rank's, written again with the divergence.
  cp -r "$work/a" "$work/b"
  rm "$work/b/rank$div_rank.jsonl"  # make_run never writes over a file
  "$make_run" "$work/b" "${args[@]}" --diverge "$div_step:$div_rank:5" --only "$div_rank:$div_rank"
  touch "$work/.done"
fi
cd "$work"
files=(a/*.jsonl b/*.jsonl)
bytes=$(du -cb --apparent-size a b | tail -n1 | cut -f1)


# diff_checked NAME DTRACE: one diff, its report checked (exit 1, the planted divergence first).
diff_checked() {
  local status=0
  "$2" "${diff_args[@]}" a b >"$1.json" 2>"$1.err" || status=$?
  [ "$status" = 1 ] || { cat "$1.err" >&2; echo "many_files.sh: $1: diff exit $status, expected 1" >&2; exit 1; }
  python3 - "$1.json" $div_step $div_rank <<'PY' || exit 1
import json, sys
f = json.load(open(sys.argv[1]))["first"]
if (f["step"], f["rank"], f["seq"]) != (int(sys.argv[2]), int(sys.argv[3]), 5):
    sys.exit(f"many_files.sh: the planted divergence was not found first: {f}")
PY
}

names=(cat dtrace)
[ -z "$baseline" ] || names+=(baseline)
# run NAME: one run of NAME, its output to NAME's files.
run() {
  case "$1" in
    cat) cat "${files[@]}" >/dev/null ;;
    dtrace) diff_checked dtrace "$dtrace" ;;
    baseline) diff_checked baseline "$baseline" ;;
  esac
}

cat "${files[@]}" >/dev/null  # page cache warm
for name in "${names[@]}"; do : >"$name.times"; done
for ((r = 0; r < repeats; ++r)); do
  for name in "${names[@]}"; do
    t0=$(now)
    run "$name"
    echo "$(now) - $t0" | bc -l >>"$name.times"
  done
done

echo "$ranks rank files a side, $steps steps, layer level, $((bytes / 1000000)) MB both runs; ${diff_args[*]}; median of $repeats"
printf '%-9s %8s %8s\n' run wall_s x_cat
cat_s=$(median <cat.times)
for name in "${names[@]}"; do
  s=$(median <"$name.times")
  printf '%-9s %8.3f %8.2f\n' "$name" "$s" "$(echo "$s / $cat_s" | bc -l)"
done

echo
echo "system calls (strace -f -c, one run each)"
calls=(openat close read pread64 mmap munmap newfstatat mprotect futex)
printf '%-9s' run
for c in "${calls[@]}" total; do printf ' %10s' "$c"; done
echo
for name in "${names[@]}"; do
  case "$name" in
    cat) strace -f -c -o "$name.strace" cat "${files[@]}" >/dev/null ;;
    dtrace) strace -f -c -o "$name.strace" "$dtrace" "${diff_args[@]}" a b >/dev/null 2>&1 || true ;;
    baseline) strace -f -c -o "$name.strace" "$baseline" "${diff_args[@]}" a b >/dev/null 2>&1 || true ;;
  esac
  printf '%-9s' "$name"
  for c in "${calls[@]}"; do
    printf ' %10s' "$(awk -v c="$c" '$NF == c { n = $4 } END { print n + 0 }' "$name.strace")"
  done
  printf ' %10s\n' "$(awk '$NF == "total" { print $4 }' "$name.strace")"
done
