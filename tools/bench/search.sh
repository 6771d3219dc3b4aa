#!/usr/bin/env bash
# Benchmark: the search diff over chained step digests against the streaming
# diff (`--stream`) on the same pair of runs (issue 16).
#
# A pair of step-level runs (make_run --records 3: two records and a loss per
# step, each end record with its chain), RANKS x STEPS, generated once into
# $WORK; run B differs from A at one record of one rank late in the run
# (step STEPS - STEPS/50, rank RANKS/2 + 1). Both diffs run with the page cache
# as they find it after generation; each is timed (wall) and its bytes read
# are taken from /proc/PID/io of the finished process (rchar: bytes its read
# calls returned, cached or not; read_bytes: what it made the disk read).
# The two reports must agree (the same fields but the search's own note and
# the records counted, which dtrace(1) says differ).
#
#   tools/bench/search.sh [BUILD_DIR] [RANKS] [STEPS]   (defaults: build-release 64 100000)
#   WORK=/tmp/dtrace-bench-search KEEP=1 (keep the generated runs)
set -euo pipefail
build=${1:-build-release}
ranks=${2:-64}
steps=${3:-100000}
. "$(dirname "$0")/release.sh"
release_build "$build" ./dtrace:executable tools/bench/make_run
work=${WORK:-/tmp/dtrace-bench-search}/$ranks-$steps
dtrace="$build/dtrace"
make_run="$build/tools/bench/make_run"
div_step=$((steps - steps / 50))
div_rank=$((ranks / 2 + 1))

mkdir -p "$work"
if [ ! -f "$work/.done" ]; then
  rm -rf "$work/a" "$work/b"
  t0=$(date +%s)
  "$make_run" "$work/a" --ranks "$ranks" --steps "$steps" --records 3 --chain
  "$make_run" "$work/b" --ranks "$ranks" --steps "$steps" --records 3 --chain --diverge "$div_step:$div_rank:1"
  touch "$work/.done"
  echo "generated in $(($(date +%s) - t0)) s"
fi
size=$(du -sb "$work/a" "$work/b" | awk '{s += $1} END {print s}')
echo "runs: $ranks ranks x $steps steps, $size bytes (both), divergence planted at step $div_step rank $div_rank"
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
