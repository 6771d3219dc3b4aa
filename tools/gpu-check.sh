#!/usr/bin/env bash
# Everything issue 5 can only show on a GPU, in one go, for a session that has
# one: build with CUDA (or reuse a build directory carried over), run the GPU
# tests (device vs CPU, hash --gpu, the C program), then the fingerprint
# benchmark, and print a short table at the end. Without nvcc or without a
# device it says so plainly and stops short of pretending.
#
#   tools/gpu-check.sh [BUILD_DIR]        (default: build-gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
export PATH="/usr/local/cuda/bin:$PATH"
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

if [ ! -f "$build/build.ninja" ]; then
  if ! command -v nvcc >/dev/null; then
    echo "gpu-check: no nvcc on PATH (nor /usr/local/cuda/bin): cannot build the GPU code" >&2
    exit 2
  fi
  meson setup "$build" -Dcuda=enabled >"$log/setup" 2>&1 || { cat "$log/setup"; exit 2; }
fi
grep -q "CUDA: True\|have_cuda.*true" "$build/meson-logs/meson-log.txt" 2>/dev/null ||
  echo "gpu-check: warning: $build may not be a CUDA build (meson -Dcuda=enabled)" >&2
meson compile -C "$build" >"$log/build" 2>&1 || { tail -40 "$log/build"; exit 2; }

device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
[ -n "$device" ] || device="none visible (nvidia-smi found no GPU)"
echo "gpu-check: device: $device"

result() {  # name, meson test name
  local out status
  out=$(meson test -C "$build" --no-rebuild --print-errorlogs "$2" 2>&1)
  status=$?
  if grep -q "^Ok: *[1-9]" <<<"$out"; then
    echo "pass"
  elif grep -q "^Skipped: *[1-9]" <<<"$out"; then
    echo "SKIPPED (no GPU)"
  else
    echo "$out" >"$log/$1.failed"
    echo "FAIL (status $status)"
  fi
}
gpu_tests=$(result gpu gpu)
hash_gpu=$(result hash_gpu e2e/hash_gpu)
c_api=$(result c_api e2e/c_api_install)
unit=$(result unit unit)
for failed in "$log"/*.failed; do [ -f "$failed" ] && cat "$failed"; done

tools/bench/fingerprint.sh "$build" "${REPEATS:-3}" | tee "$log/bench"

echo
echo "gpu-check summary  $(date -u +%Y-%m-%dT%H:%MZ)  device: $device"
printf '  %-40s %s\n' "unit tests (lane arithmetic vs libxxhash)" "$unit"
printf '  %-40s %s\n' "GPU tests (device vs CPU, batch)" "$gpu_tests"
printf '  %-40s %s\n' "dtrace hash --gpu vs CPU" "$hash_gpu"
printf '  %-40s %s\n' "C program on installed libdtrace" "$c_api"
grep -E "XXH3|dtrace hash|dtrace::fingerprint|1 GiB|batch, |torch|device |not measured|FAILED" "$log/bench" |
  sed 's/^ */  bench: /'
case "$gpu_tests$hash_gpu$c_api$unit" in *FAIL*) exit 1 ;; esac
