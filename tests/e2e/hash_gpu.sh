#!/usr/bin/env bash
# `dtrace hash --gpu` prints the CPU's digests where a GPU is; elsewhere it
# fails with a clear message and exit status 2: "built without CUDA" in builds
# without nvcc, "no CUDA device" in CUDA builds on a machine without a GPU
# (then the comparison is skipped, and the test says so).
set -uo pipefail
: "${DTRACE:?}" "${HAVE_CUDA:?}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
: >"$scratch/empty"
head -c 3000001 /dev/urandom >"$scratch/big"
printf 'dtrace' >"$scratch/small"
files=("$scratch/empty" "$scratch/small" "$scratch/big")

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
  if grep -qi "no CUDA-capable device\|insufficient for CUDA runtime\|cudaErrorNoDevice\|cudaErrorInsufficientDriver" "$scratch/gpu.err"; then
    echo "SKIP: no CUDA device here; dtrace hash --gpu failed cleanly with status 2"
    exit 77
  fi
  exit 1
fi
"$DTRACE" hash "${files[@]}" >"$scratch/cpu.out"
diff "$scratch/cpu.out" "$scratch/gpu.out" && cat "$scratch/gpu.out"
