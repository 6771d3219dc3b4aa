#!/usr/bin/env bash
# The recorder's C API from Python through ctypes (Debian's /usr/bin/python3,
# where a PyTorch binding runs, or TORCH_PYTHON as in torch-lib.sh: the Debian 13
# root's, tools/test.sh's second pass): tests/capi/recorder_smoke.py opens a recorder,
# records a step, closes it, and checks that bad calls give codes and messages;
# `dtrace check` certifies the log it wrote, the digest it computed with
# dtrace_fingerprint_host is the one logged, and its exit left rank0.status
# saying "exit 0".
. "$(dirname "$0")/lib.sh"
: "${BUILD_ROOT:?}" "${SOURCE_ROOT:?}"
lib="$BUILD_ROOT/src/capi/libdtrace.so"
[ -f "$lib" ] || fail "no $lib"
# A sanitizer build's libdtrace needs its runtime loaded before Python's own code.
preload=""
needed=$(ldd "$lib")
case "$needed" in
  *libasan*) preload=$(echo "$needed" | awk '/libasan|libubsan/ {printf "%s:", $3}') ;;
esac
LD_PRELOAD="$preload" ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" \
  "${TORCH_PYTHON:-/usr/bin/python3}" "$SOURCE_ROOT/tests/capi/recorder_smoke.py" "$lib" "$WORK/run" >"$OUT" 2>"$ERR" ||
  fail "recorder_smoke.py"
digest=$(sed -n 's/.*digest \([0-9a-f]*\)$/\1/p' "$OUT")
[ -n "$digest" ] || fail "no digest printed"
grep -q "\"name\":\"y\".*\"hash\":\"$digest\"" "$WORK/run/rank0.jsonl" || fail "the logged digest is not $digest"
run_dtrace 0 check "$WORK/run"
out_has "certified"
# Python's exit reached the rank's end marker beside its log, as dtrace_torch's
# run_dir gets it (dtrace-fp(5), The end of a run).
[ "$(head -c 7 "$WORK/run/rank0.status")" = "exit 0 " ] ||
  fail "no end marker after Python exited: $(cat "$WORK/run/rank0.status" 2>&1)"
[ ! -e "$WORK/run-never" ] || fail "a refused open created its run directory"
echo ok
