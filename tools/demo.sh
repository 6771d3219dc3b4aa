#!/usr/bin/env bash
# The main job: builds dtrace and diffs two shipped runs that diverge.
#   tools/demo.sh [BUILD_DIR]        (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tools/setup-deps.sh
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
meson compile -C "$build" >/dev/null
set +e
"$build/dtrace" diff testdata/demo/a testdata/demo/b
status=$?
set -e
echo "dtrace diff exit status: $status (0 identical, 1 diverged, 2 trouble)"
[ "$status" -eq 1 ]
