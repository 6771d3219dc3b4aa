#!/usr/bin/env bash
# Benchmark: how far `dtrace watch` lags behind a job writing its logs fast
# (issue 14). make_run writes a reference run and the same run with one record
# differing in the last step (8 ranks, layer shape, about 480 MB at the default
# STEPS); watch_feed then plays the second into an empty directory at RATE MB/s
# (every file round robin in 64 KiB pieces, lines cut anywhere) while
# `dtrace watch RUN --against REF --json` follows it. The lag is the time from
# the feed's last byte (the divergent step's end line is in the last piece
# of its file) to watch's report; read_at says when watch had read it.
# Reports the rate the feed reached, the lag, watch's CPU time and peak RSS.
#
#   tools/bench/watch.sh [BUILD_DIR] [REPEATS]     (defaults: build-release, 3)
#   RATES="1000 250" STEPS=1400 WORK=/tmp/dtrace-bench-watch ANY_BUILD_TYPE=0
set -euo pipefail
build=${1:-build-release}
. "$(dirname "$0")/release.sh"
if [ "${ANY_BUILD_TYPE:-0}" = 1 ]; then
  # Where no release build can be made in time: measure BUILD_DIR as it is,
  # and say so (RESULTS.md names the build type of every figure).
  echo "watch.sh: measuring a $(build_type "$build") build (ANY_BUILD_TYPE=1)" >&2
  meson compile -C "$build" dtrace:executable tools/bench/make_run tools/bench/watch_feed >/dev/null
else
  release_build "$build" dtrace:executable tools/bench/make_run tools/bench/watch_feed
fi
repeats=${2:-3}
work=${WORK:-/tmp/dtrace-bench-watch}
steps=${STEPS:-1400}
dtrace="$build/dtrace"
mkdir -p "$work"
if [ ! -f "$work/.done-$steps" ]; then
  rm -rf "$work/ref" "$work/src"
  "$build/tools/bench/make_run" "$work/ref" --ranks 8 --steps "$steps"
  "$build/tools/bench/make_run" "$work/src" --ranks 8 --steps "$steps" --diverge "$((steps - 1)):5:200"
  touch "$work/.done-$steps"
fi
cat "$work"/ref/*.jsonl >/dev/null  # the reference in the page cache
echo "run: $(du -sh "$work/src" | cut -f1) in $(ls "$work/src" | wc -l) files, $steps steps"
printf '%-10s %-12s %-10s %-12s %-10s %-10s\n' rate_MB/s reached_MB/s lag_s read_lag_s cpu_s rss_MB
for rate in ${RATES:-1000 250}; do
  for _ in $(seq "$repeats"); do
    rm -rf "$work/run"
    /usr/bin/time -f '%U %S %M' -o "$work/time.txt" \
      "$dtrace" watch "$work/run" --against "$work/ref" --json --idle 10 --progress 1 >"$work/events.jsonl" &
    watcher=$!
    sleep 0.2
    "$build/tools/bench/watch_feed" "$work/src" "$work/run" --rate "$rate" >"$work/feed.json"
    status=0
    wait "$watcher" || status=$?
    [ "$status" = 1 ] || { echo "watch exited $status, expected 1 (the planted divergence)" >&2; exit 1; }
    tail -n1 "$work/events.jsonl" >"$work/last.json"
    python3 - "$work/feed.json" "$work/last.json" "$work/time.txt" "$rate" "$steps" <<'PY'
import json, sys
feed, last = json.load(open(sys.argv[1])), json.load(open(sys.argv[2]))
user, system, rss = open(sys.argv[3]).read().split()[-3:]
assert last["event"] == "diverged" and last["diff"]["first"]["step"] == int(sys.argv[5]) - 1, last
print(f'{sys.argv[4]:<10} {feed["mb_per_s"]:<12} {last["reported_at"] - feed["last_write"]:<10.3f} '
      f'{last["read_at"] - feed["last_write"]:<12.3f} {float(user) + float(system):<10.2f} {int(rss) / 1024:<10.1f}')
PY
  done
done
