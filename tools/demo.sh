#!/usr/bin/env bash
# The main job: build dtrace and minitrain, train two short runs of minitrain
# with a planted nondeterministic kernel (split-K GEMM accumulated in a random
# order) on the shipped corpus, find where they diverge with `dtrace diff`, and
# name the kernel with `dtrace bisect`, which also writes the HTML report
# (dtrace(1), HTML REPORT) whose path it prints last.
#   tools/demo.sh [BUILD_DIR] [SWITCH]       (defaults: build, splitk)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
switch=${2:-splitk}
tools/setup-deps.sh
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
# Only the two programs the demo runs, not the test suite (bash tools/test.sh
# builds and runs everything). Named with their type: the library is also
# called dtrace, and minitrain's kernels are a library of that name too.
meson compile -C "$build" dtrace:executable tools/minitrain/minitrain:executable >/dev/null
minitrain="$build/tools/minitrain/minitrain"
dtrace="$build/dtrace"
work="$build/demo"
rm -rf "$work"  # the demo's own output from an earlier run, nothing a user recorded
mkdir -p "$work"
cd "$work"

say() { printf '\n$ %s\n' "$*"; }
say minitrain --steps 20 --ranks 4 --nondet "$switch" --out run-a
"../../$minitrain" --steps 20 --ranks 4 --nondet "$switch" --out run-a
say minitrain --steps 20 --ranks 4 --nondet "$switch" --out run-b
"../../$minitrain" --steps 20 --ranks 4 --nondet "$switch" --out run-b
say dtrace diff run-a run-b
set +e
"../../$dtrace" diff run-a run-b
diff_status=$?
say dtrace bisect --trust --html report.html
"../../$dtrace" bisect --trust --html report.html 2>/dev/null | sed -n '1,/^replays/p'
bisect_status=${PIPESTATUS[0]}
set -e
echo
echo "planted by minitrain (ground truth, never in the logs): $("../../$minitrain" --print-planted "$switch")"
echo "dtrace diff exit status $diff_status (1: diverged), dtrace bisect exit status $bisect_status (0: kernel named)"
[ -f report.html ] && echo "report: $(pwd)/report.html (open it in a browser)"
[ "$diff_status" -eq 1 ] && [ "$bisect_status" -eq 0 ]
