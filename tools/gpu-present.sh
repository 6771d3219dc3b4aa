# shellcheck shell=bash
# Sourced by tests/e2e/hash_gpu.sh and tools/gpu-check.sh: the rules by which a
# GPU check may be skipped, the same as tests/gpu_probe.hpp's. Only "no CUDA
# device" is a skip; a device the system shows that CUDA cannot use, or any
# other CUDA failure, is a failure.

# gpu_device_present: the operating system shows an NVIDIA GPU (a driver's
# /proc/driver/nvidia/gpus entry, a /dev/nvidiaN node, or nvidia-smi listing
# one), whatever CUDA says. DTRACE_GPU_PRESENT=0 or 1 overrides (for the tests
# of these rules, tests/e2e/gpu_skip_rules.sh).
gpu_device_present() {
  case "${DTRACE_GPU_PRESENT:-}" in
    1) return 0 ;;
    0) return 1 ;;
  esac
  compgen -G '/proc/driver/nvidia/gpus/*' >/dev/null && return 0
  compgen -G '/dev/nvidia[0-9]*' >/dev/null && return 0
  nvidia-smi -L 2>/dev/null | grep '^GPU ' >/dev/null && return 0
  return 1
}

# check_verdict STATUS OUTPUT: what a check that exited STATUS (77: skipped)
# and printed OUTPUT counts as: "pass", "SKIPPED (reason)" or "FAIL (...)".
# A skip where a device is present is a failure.
check_verdict() {
  local status=$1 out=$2 reason
  case $status in
    0) echo "pass" ;;
    77)
      reason=$(grep -m1 -o 'SKIP: .*' <<<"$out" | cut -c7- | cut -c1-70)
      if gpu_device_present; then
        echo "FAIL (skipped with a GPU present: ${reason:-no reason given})"
      else
        echo "SKIPPED (${reason:-no reason given})"
      fi
      ;;
    *) echo "FAIL (status $status)" ;;
  esac
}
