#!/usr/bin/env bash
# Builds dtrace and runs the whole test suite (unit and end-to-end), and its
# Python tests again on torch 2.x (tools/setup-torch2.sh), then builds
# it again with AddressSanitizer and UndefinedBehaviorSanitizer in BUILD_DIR-asan
# and runs the suite there too. Warnings are errors in both builds
# (-Dwerror=true, passed here rather than as a default option, so that a user's
# or a packager's build is not failed by an optimizer's false positive).
#   tools/test.sh [--plain|--asan] [--release] [BUILD_DIR]      (default: build)
#   --plain    only the ordinary build and the torch 2.x pass (no sanitizers)
#   --asan     only the sanitizer build
#   --release  make the ordinary build a release build (-Dbuildtype=release),
#              as CI does, so a release build is compiled and tested too
set -euo pipefail
cd "$(dirname "$0")/.."
plain=1
asan=1
buildtype=debugoptimized
while [ $# -gt 0 ]; do
  case "$1" in
    --plain) asan=0; shift ;;
    --asan) plain=0; shift ;;
    --release) buildtype=release; shift ;;
    *) break ;;
  esac
done
build=${1:-build}
jobs=${DTRACE_JOBS:-2}
tools/setup-deps.sh
# meson compiles through ccache when it is installed (setup-deps installs it):
# sources are named relative to the build directory, so with the directory
# left out of the hash a fresh clone's build (CI's) reuses a machine's earlier
# compiles of the same code and flags.
export CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-true}
# nvcc where the CUDA toolkit puts it, so CI compiles the GPU code (cuda=auto).
[ -x /usr/local/cuda/bin/nvcc ] && export PATH="/usr/local/cuda/bin:$PATH"

if [ "$plain" = 1 ]; then
  # An existing build directory is brought to these options too.
  if [ -f "$build/build.ninja" ]; then
    meson configure "$build" -Dwerror=true -Dbuildtype="$buildtype" >/dev/null
  else
    meson setup "$build" -Dwerror=true -Dbuildtype="$buildtype" >/dev/null
  fi
  meson compile -C "$build" -j "$jobs"
  meson test -C "$build" --print-errorlogs --num-processes "$jobs"

  # The Python suite again on torch 2.x: Debian 13's python3-torch in a root
  # tools/setup-torch2.sh makes once per machine, the host's dtrace and
  # libdtrace (docs/torch.md, Tested versions). Once: not in the sanitizer pass.
  # DTRACE_TORCH2=0 leaves it out; under CI it cannot be left out, and a root
  # that cannot be made is a failure there, as a missing torch is (lib.sh).
  if [ "${CI:-}" = true ] || [ "${DTRACE_TORCH2:-1}" != 0 ]; then
    if [ "$(id -u)" -ne 0 ] && [ "${CI:-}" != true ]; then
      echo "test.sh: the torch 2.x pass needs root (chroot); left out" >&2
    else
      torch2=$(tools/setup-torch2.sh --lib "$build/src/capi/libdtrace.so")
      DTRACE_TORCH2_BINDS="$(pwd -P):$(cd "$build" && pwd -P)"
      export DTRACE_TORCH2_BINDS
      # A pass that ran the host's torch again would pass and test nothing new:
      # torch 2, and sys.executable (the interpreter a replay command names)
      # the root's python, so that dtrace's replays run in the root too.
      "$torch2" -c 'import sys, torch
sys.exit("the torch 2.x pass has torch " + torch.__version__ if int(torch.__version__.split(".")[0]) < 2 else
         None if sys.executable == sys.argv[1] else "its replays would run " + sys.executable)' "$torch2"
      TORCH_PYTHON="$torch2" \
        meson test -C "$build" --print-errorlogs --num-processes "$jobs" --suite python
    fi
  fi
fi

if [ "$asan" = 1 ]; then
  # Any report is a failure: UBSan stops at the first, LSan checks every exit.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  asan_build=$build-asan
  # -O1 -g1: line tables for the sanitizers' stack traces, without the full
  # debug information and -O2's optimizer, which made this build three times
  # slower to compile (src/diff/search.cpp: 289 s at -O2 -g against 93 s at
  # -O1 -g1, side by side on a loaded 2-core machine); CI's hour is mostly
  # this build.
  # -Wmaybe-uninitialized is left to the release build: at -O1 GCC 12 reports
  # it where the optimizer has not looked far enough to see the value set.
  asan_options=(-Dwerror=true -Doptimization=1 -Ddebug=false "-Dcpp_args=-g1 -Wno-maybe-uninitialized"
                -Dc_args=-g1)
  if [ -f "$asan_build/build.ninja" ]; then
    meson configure "$asan_build" "${asan_options[@]}" >/dev/null
  else
    meson setup "$asan_build" "${asan_options[@]}" -Db_sanitize=address,undefined -Db_lundef=false \
      -Dcuda=disabled >/dev/null
  fi
  meson compile -C "$asan_build" -j "$jobs"
  # The Python tests (suite 'python': dtrace_torch, the C API through ctypes)
  # ran in the plain pass; a sanitized libdtrace inside CPython adds nothing
  # but minutes and interpreter noise, so they run once. So do the browser
  # tests (suite 'browser'): the page is the same bytes, the time is Chromium's.
  # And the bisect tests' second way (suite 'launches', per-replay launches):
  # the sessions' runs of the same tests exercise the runner under sanitizers.
  meson test -C "$asan_build" --print-errorlogs --num-processes "$jobs" --timeout-multiplier 4 \
    --no-suite python --no-suite browser --no-suite launches
fi
