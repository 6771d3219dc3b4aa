#!/usr/bin/env bash
# `dtrace hash --gpu` prints the CPU's digests where a GPU is; elsewhere it
# fails with a clear message and exit status 2: "built without CUDA" in builds
# without nvcc, "no CUDA device" in CUDA builds on a machine without a GPU
# (then the comparison is skipped, and the test says so). Any other failure,
# or "no CUDA device" where the system shows a GPU, fails the test.
set -uo pipefail
: "${DTRACE:?}" "${HAVE_CUDA:?}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
: >"$scratch/empty"
head -c 3000001 /dev/urandom >"$scratch/big"
printf 'dtrace' >"$scratch/small"
files=("$scratch/empty" "$scratch/small" "$scratch/big")
. "$(dirname "$0")/../../tools/gpu-present.sh"

"$DTRACE" hash --gpu "${files[@]}" >"$scratch/gpu.out" 2>"$scratch/gpu.err"
status=$?
if [ "$HAVE_CUDA" != 1 ]; then
  cat "$scratch/gpu.err"
  [ "$status" -eq 2 ] && grep -q "built without CUDA" "$scratch/gpu.err"
  exit
fi
if [ "$status" -ne 0 ]; then
  cat "$scratch/gpu.err"
  [ "$status" -eq 2 ] || exit 1
  # Only "no CUDA device" is a skip, and only where the system shows no GPU:
  # any other CUDA failure, or this one on a machine with a GPU, fails.
  if grep -q -- "--gpu: no usable CUDA device: " "$scratch/gpu.err" && ! gpu_device_present; then
    echo "SKIP: no CUDA device here; dtrace hash --gpu failed cleanly with status 2"
    exit 77
  fi
  gpu_device_present && echo "FAIL: a GPU is present and dtrace hash --gpu failed"
  exit 1
fi
"$DTRACE" hash "${files[@]}" >"$scratch/cpu.out"
diff "$scratch/cpu.out" "$scratch/gpu.out" && cat "$scratch/gpu.out"
