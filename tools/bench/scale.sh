#!/usr/bin/env bash
# Scale: `dtrace diff` on a layer-level run of 4,096 ranks x 100 steps next to
# an 8-rank run of about the same size (same steps, more layers per rank), each
# against a copy with one divergence planted late. Prints wall time, CPU time
# and peak RSS side by side, and the cores used ((user + sys) / wall). The
# reader reads a run's files round robin within a fixed buffer budget, on a
# thread per run, so memory must not grow with the number of ranks.
#
#   tools/bench/scale.sh [BUILD_DIR]     (default: build-release; WORK=dir to place the runs,
#                                         KEEP=1 to keep them, LAYERS=N for the 4096-rank run)
set -euo pipefail
build=${1:-build-release}
. "$(dirname "$0")/release.sh"
release_build "$build"
work=${WORK:-${TMPDIR:-/tmp}/dtrace-bench-scale}
dtrace="$build/dtrace"
make_run="$build/tools/bench/make_run"
layers=${LAYERS:-1}
steps=100
[ -x "$dtrace" ] && [ -x "$make_run" ] || { echo "scale.sh: build first (ninja -C $build)" >&2; exit 2; }
[ "${KEEP:-0}" = 1 ] || trap 'rm -rf "$work"' EXIT
mkdir -p "$work"

# One line of records per (rank, step) is 12 per layer + a loss and an end record:
# the 8-rank run gets as many layers as make its size match the 4096-rank one.
wide_layers=$(( (4096 * (12 * layers + 2) / 8 - 2) / 12 ))

generate() {  # NAME RANKS LAYERS
  local name=$1 ranks=$2 l=$3
  [ -f "$work/$name.done" ] && return 0
  rm -rf "$work/$name-a" "$work/$name-b"
  "$make_run" "$work/$name-a" --ranks "$ranks" --steps $steps --layers "$l"
  "$make_run" "$work/$name-b" --ranks "$ranks" --steps $steps --layers "$l" \
    --diverge $((steps - 10)):$((ranks - 1)):5
  touch "$work/$name.done"
}

measure() {  # NAME RANKS LAYERS
  local name=$1 ranks=$2 l=$3 status=0
  local size files
  size=$(du -sh "$work/$name-a" | cut -f1)
  files=$(find "$work/$name-a" -name '*.jsonl' | wc -l)
  cat "$work/$name-a"/* "$work/$name-b"/* >/dev/null  # page cache warm
  /usr/bin/time -f "%e %U %S %M" -o "$work/$name.time" "$dtrace" diff --json \
    "$work/$name-a" "$work/$name-b" >"$work/$name.json" 2>"$work/$name.err" || status=$?
  [ "$status" = 1 ] || { cat "$work/$name.err" >&2; echo "scale.sh: $name: diff exit $status, expected 1" >&2; exit 1; }
  python3 - "$work/$name.json" $((steps - 10)) $((ranks - 1)) <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
f = d["first"]
if (f["step"], f["rank"], f["seq"]) != (int(sys.argv[2]), int(sys.argv[3]), 5):
    sys.exit(f"scale.sh: the planted divergence was not found first: {f}")
PY
  read -r wall user sys rss < <(tail -n1 "$work/$name.time")  # after "Command exited with non-zero status"
  local records
  records=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["compared"]["records"])' "$work/$name.json")
  local cores
  cores=$(echo "scale=2; ($user + $sys) / $wall" | bc -l)
  printf '%-6s %6s %6s %8s %12s %8s %8s %8s %6s %10s\n' "$name" "$ranks" "$l" "$size x2" "$records" \
    "$wall" "$user" "$sys" "$cores" "$((rss / 1024)) MiB"
}

generate wide 8 "$wide_layers"
generate ranks 4096 "$layers"
printf '%-6s %6s %6s %8s %12s %8s %8s %8s %6s %10s\n' run ranks layers size records wall_s user_s sys_s cores peak_rss
measure wide 8 "$wide_layers"
measure ranks 4096 "$layers"
