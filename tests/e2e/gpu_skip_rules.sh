#!/bin/bash
# The GPU checks skip only where there is no CUDA device (tools/gpu-present.sh),
# shown here without a GPU: hash_gpu.sh run on stand-ins for a CUDA build of
# dtrace that fail as CUDA would, with the system made to show a GPU or not
# (DTRACE_GPU_PRESENT), and gpu-check's verdict on a check that skipped.
. "$(dirname "$0")/lib.sh"
HASH_GPU=$SOURCE_ROOT/tests/e2e/hash_gpu.sh

# fake NAME MESSAGE: a "dtrace" whose `hash --gpu` fails with MESSAGE, exit 2.
fake() {
  printf '#!/bin/sh\necho "dtrace: error: $2: %s" >&2\nexit 2\n' "$2" >"$1"
  chmod +x "$1"
}
fake no-device "--gpu: no usable CUDA device: cuda/fingerprint.cu:40: cudaSetDevice(0) failed: no CUDA-capable device is detected (cudaErrorNoDevice)"
fake broken "--gpu: cuda/fingerprint.cu:88: cudaMemcpy failed: an illegal memory access was encountered (cudaErrorIllegalAddress)"

# hash_gpu_status FAKE PRESENT: hash_gpu.sh's exit status on FAKE.
hash_gpu_status() {
  local got=0
  DTRACE=$WORK/$1 HAVE_CUDA=1 DTRACE_GPU_PRESENT=$2 "$HASH_GPU" >"$OUT" 2>"$ERR" || got=$?
  echo "$got"
}
[ "$(hash_gpu_status no-device 0)" = 77 ] || fail "no device, none shown: expected a skip (77)"
out_has "SKIP: no CUDA device here"
[ "$(hash_gpu_status no-device 1)" = 1 ] || fail "no device said with a GPU shown: expected a failure"
out_has "FAIL: a GPU is present"
[ "$(hash_gpu_status broken 0)" = 1 ] || fail "another CUDA error: expected a failure, not a skip"
[ "$(hash_gpu_status broken 1)" = 1 ] || fail "another CUDA error with a GPU: expected a failure"

# gpu-check's verdicts: a skip counts as SKIPPED only without a GPU.
verdict() { (. "$SOURCE_ROOT/tools/gpu-present.sh" && DTRACE_GPU_PRESENT=$1 check_verdict "$2" "$3"); }
[ "$(verdict 0 0 "")" = pass ] || fail "status 0 is a pass"
[ "$(verdict 0 77 "SKIP: no CUDA device (x)")" = "SKIPPED (no CUDA device (x))" ] ||
  fail "a skip without a GPU: $(verdict 0 77 "SKIP: no CUDA device (x)")"
case "$(verdict 1 77 "SKIP: no CUDA device (x)")" in
  "FAIL (skipped with a GPU present: no CUDA device (x))") ;;
  *) fail "a skip with a GPU present must be a FAIL: $(verdict 1 77 "SKIP: no CUDA device (x)")" ;;
esac
[ "$(verdict 0 1 "")" = "FAIL (status 1)" ] || fail "status 1 is a FAIL"
echo ok
