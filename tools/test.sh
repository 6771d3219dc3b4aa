#!/usr/bin/env bash
# Builds dtrace and runs the whole test suite (unit and end-to-end).
#   tools/test.sh [BUILD_DIR]        (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
tools/setup-deps.sh
# nvcc where the CUDA toolkit puts it, so CI compiles the GPU code (cuda=auto).
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"
[ -f "$build/build.ninja" ] || meson setup "$build" >/dev/null
meson compile -C "$build"
meson test -C "$build" --print-errorlogs
