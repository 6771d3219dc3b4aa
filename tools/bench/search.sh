#!/usr/bin/env bash
# Benchmark: the search diff over chained step digests against the streaming
# diff (`--stream`) on the same pair of runs (issue 16).
#
# A pair of step-level runs (make_run --records 3: two records and a loss per
# step, each end record with its chain), RANKS x STEPS, generated once into
# $WORK; run B differs from A at one record of one rank late in the run
# (step STEPS - STEPS/50, rank RANKS/2 + 1): its other rank files are copies
# of A's, as make_run writes them alike. Both diffs run with the page cache
# as they find it after generation; each is timed (wall) and its bytes read
# are taken from /proc/PID/io of the finished process (rchar: bytes its read
# calls returned, cached or not; read_bytes: what it made the disk read).
# The two reports must agree (the same fields but the search's own note and
# the records counted, which dtrace(1) says differ).
#
# SHAPE crashed: run B also stopped at step STEPS - STEPS/100 on every rank
# (a crash: rank 0's file ends in a line cut short), so the search cannot
# answer alone and the streaming diff reads each rank from where its chains
# stop agreeing (the diverged rank from the divergence, the others A's tail
# of steps B lacks).
#
#   tools/bench/search.sh [BUILD_DIR] [RANKS] [STEPS] [SHAPE]   (defaults: build-release 64 100000 late)
#   WORK=/tmp/dtrace-bench-search KEEP=1 (keep the generated runs)
set -euo pipefail
build=${1:-build-release}
ranks=${2:-64}
steps=${3:-100000}
shape=${4:-late}
case "$shape" in late | crashed) ;; *) echo "search.sh: SHAPE is late or crashed" >&2; exit 2 ;; esac
. "$(dirname "$0")/release.sh"
release_build "$build" ./dtrace:executable tools/bench/make_run
work=${WORK:-/tmp/dtrace-bench-search}/$ranks-$steps
[ "$shape" = late ] || work=$work-$shape
dtrace="$build/dtrace"
make_run="$build/tools/bench/make_run"
div_step=$((steps - steps / 50))
div_rank=$((ranks / 2 + 1))

mkdir -p "$work"
if [ ! -f "$work/.done" ]; then
  rm -rf "$work/a" "$work/b"
  t0=$(date +%s)
  # Run A by one make_run per core, each writing a slice of the ranks; run B
  # is A's bytes but on the diverged rank (make_run writes a rank's file from
  # the arguments and the rank alone), so its other files are copied and
  # only the diverged rank's is written. Same runs as two whole invocations,
  # in a fraction of the time (4,096 x 10,000 steps is about 40 GB).
  args=(--ranks "$ranks" --steps "$steps" --records 3 --chain)
  slices=$(nproc)
  [ "$slices" -le "$ranks" ] || slices=$ranks
  pids=()
  for ((i = 0; i < slices; i++)); do
    "$make_run" "$work/a" "${args[@]}" --only "$((ranks * i / slices)):$((ranks * (i + 1) / slices - 1))" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid"; done
  mkdir -p "$work/b"
  for ((r = 0; r < ranks; r++)); do
    [ "$r" = "$div_rank" ] || echo "rank$r.jsonl"
  done | (cd "$work/a" && xargs cp -t "$work/b")
  "$make_run" "$work/b" "${args[@]}" --diverge "$div_step:$div_rank:1" --only "$div_rank:$div_rank"
  if [ "$shape" = crashed ]; then
    cut=$((steps - steps / 100))
    for ((r = 0; r < ranks; r++)); do
      f="$work/b/rank$r.jsonl"
      at=$(grep -b -m1 -F "{\"step\":$cut,\"rank\":$r," "$f" | cut -d: -f1)
      [ "$r" = 0 ] && at=$((at + 30))  # half a line: the crash's last write
      truncate -s "$at" "$f"
    done
  fi
  touch "$work/.done"
  echo "generated in $(($(date +%s) - t0)) s"
fi
size=$(du -sb "$work/a" "$work/b" | awk '{s += $1} END {printf "%.0f\n", s}')
echo "runs: $ranks ranks x $steps steps, $size bytes (both), divergence planted at step $div_step rank $div_rank" \
  "$([ "$shape" = crashed ] && echo "; run B crashed at step $((steps - steps / 100))")"
echo "machine: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg), build $(build_type "$build")"

# measure NAME ARGS...: runs dtrace, prints wall seconds, rchar and read_bytes.
measure() {
  local name=$1
  shift
  python3 - "$work/$name.json" "$@" <<'PY'
import os, subprocess, sys, time
out, cmd = sys.argv[1], sys.argv[2:]
with open(out, "w") as f:
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, stdout=f)
    os.waitid(os.P_PID, p.pid, os.WEXITED | os.WNOWAIT)  # a zombie still shows its io
    wall = time.monotonic() - t0
    io = dict(line.split(": ") for line in open(f"/proc/{p.pid}/io").read().split("\n") if line)
    p.wait()
print(f"{wall:.3f} {int(io['rchar'])} {int(io['read_bytes'])} {p.returncode}")
PY
}

read -r s_wall s_rchar s_disk s_rc < <(measure search "$dtrace" diff --json "$work/a" "$work/b")
read -r t_wall t_rchar t_disk t_rc < <(measure stream "$dtrace" diff --stream --json "$work/a" "$work/b")
python3 - "$work/search.json" "$work/stream.json" <<'PY'
import json, sys
def comparable(path):
    d = json.load(open(path))
    d["notes"] = [n for n in d["notes"] if not n.startswith(("searched by chained", "chained digests not searched"))]
    d["compared"].pop("records")
    return d
s, t = comparable(sys.argv[1]), comparable(sys.argv[2])
first = t["first"]
print(f"first divergence (stream): step {first['step']} rank {first['rank']} seq {first['seq']} {first['role']}")
print("reports agree" if s == t else "REPORTS DIFFER")
sys.exit(0 if s == t else 1)
PY
[ "$s_rc" = 1 ] && [ "$t_rc" = 1 ] || { echo "exit statuses: search $s_rc, stream $t_rc (1 expected)"; exit 1; }
grep -q '"searched by chained step digests' "$work/search.json" || { echo "the search was not used"; exit 1; }
printf '%-8s %8s s  rchar %14s  disk %14s\n' search "$s_wall" "$s_rchar" "$s_disk" stream "$t_wall" "$t_rchar" "$t_disk"
echo "search/stream: time $(echo "scale=5; $s_wall / $t_wall" | bc -l), bytes $(echo "scale=7; $s_rchar / $t_rchar" | bc -l)," \
  "bytes of the runs $(echo "scale=7; $s_rchar / $size" | bc -l)"
[ -n "${KEEP:-}" ] || rm -rf "$work"
