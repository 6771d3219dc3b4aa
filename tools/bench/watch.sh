#!/usr/bin/env bash
# Benchmark: how far `dtrace watch` lags behind a job writing its logs at
# 1 GB/s (issue 14). make_run writes a reference run (8 ranks, layer shape,
# about 1.4 GB at the default STEPS). watch_feed reads it into memory and cuts
# it at its steps before its clock starts, plants one differing record at the
# last step (rank 5), then writes it step after step into an empty directory
# at RATE MB/s (one write per rank file and step, as a recorder writes a step's
# lines at its end), noting when each step's last byte was written; meanwhile
# `dtrace watch RUN --against REF --json --progress 0.02` follows it. For each
# step, its lag is the time from its last byte written to the first progress
# event that has it compared on every rank; the final lag is the time from
# the last byte to the divergence report. Prints per rate: the rate the feed
# reached and its largest delay behind schedule (the writer is not the
# bottleneck while it stays small), the lag at a quarter, half, three
# quarters and the end of the run, the rate watch compared at (MB/s of RUN),
# watch's CPU time and peak RSS.
#
#   tools/bench/watch.sh [BUILD_DIR] [REPEATS]     (defaults: build-release, 2)
#   RATES="1000 500 250" STEPS=4200 WORK=/tmp/dtrace-bench-watch KEEP=1 ANY_BUILD_TYPE=0
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
repeats=${2:-2}
work=${WORK:-/tmp/dtrace-bench-watch}
steps=${STEPS:-4200}
last=$((steps - 1))
dtrace="$build/dtrace"
mkdir -p "$work"
# The runs are large: removed at the end unless KEEP=1.
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
if [ ! -f "$work/.done-$steps" ]; then
  rm -rf "$work/ref" "$work"/.done-*
  "$build/tools/bench/make_run" "$work/ref" --ranks 8 --steps "$steps"
  touch "$work/.done-$steps"
fi
cat "$work"/ref/*.jsonl >/dev/null  # the reference in the page cache
echo "run: $(du -sh "$work/ref" | cut -f1) in $(ls "$work/ref" | wc -l) files, $steps steps; uptime: $(uptime)"
printf '%-6s %-8s %-9s %-7s %-7s %-7s %-7s %-10s %-7s %-6s\n' rate reached behind_s \
  lag25_s lag50_s lag75_s lag_end watch_MB/s cpu_s rss_MB
for rate in ${RATES:-1000 500 250}; do
  for _ in $(seq "$repeats"); do
    rm -rf "$work/run"
    /usr/bin/time -f '%U %S %M' -o "$work/time.txt" \
      "$dtrace" watch "$work/run" --against "$work/ref" --json --idle 10 --progress 0.02 >"$work/events.jsonl" &
    watcher=$!
    sleep 0.2
    "$build/tools/bench/watch_feed" "$work/ref" "$work/run" --rate "$rate" --flip "$last:5" \
      --steps "$work/steps.jsonl" >"$work/feed.json"
    status=0
    wait "$watcher" || status=$?
    [ "$status" = 1 ] || { echo "watch exited $status, expected 1 (the planted divergence)" >&2; exit 1; }
    python3 - "$work" "$rate" "$last" <<'PY'
import json, sys
work, rate, last = sys.argv[1], sys.argv[2], int(sys.argv[3])
feed = json.load(open(f"{work}/feed.json"))
events = [json.loads(l) for l in open(f"{work}/events.jsonl")]
written = {s["step"]: s["written_at"] for s in map(json.loads, open(f"{work}/steps.jsonl"))}
user, system, rss = open(f"{work}/time.txt").read().split()[-3:]
end = events[-1]
assert end["event"] == "diverged" and end["diff"]["first"]["step"] == last and end["diff"]["first"]["rank"] == 5, end
# Progress times are seconds since watch began: its start from the last event.
start = end["reported_at"] - end["progress"]["seconds"]
compared = [(start + e["progress"]["seconds"], e["progress"]["step"]) for e in events if e["event"] == "progress"]
def lag(step):
    for t, s in compared:
        if s >= step:
            return t - written[step]
    return end["reported_at"] - written[step]  # compared only by the end
lags = [lag(last * q // 4) for q in (1, 2, 3)] + [end["reported_at"] - feed["last_write"]]
span = end["reported_at"] - feed["first_write"]
watch_rate = feed["bytes"] / 1e6 / span  # of RUN; watch reads as much of REF besides
print(f'{rate:<6} {feed["mb_per_s"]:<8} {feed["max_behind"]:<9.3f} ' + " ".join(f"{l:<7.3f}" for l in lags) +
      f' {watch_rate:<10.0f} {float(user) + float(system):<7.2f} {int(rss) / 1024:<6.1f}')
PY
  done
done
rm -rf "$work/run"
