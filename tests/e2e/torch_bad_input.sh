#!/usr/bin/env bash
# Bad input gives a Python exception naming the cause, and nothing recorded is
# overwritten: libdtrace not found, a run directory that already holds the run, a
# replay with no checkpoint at or before its step, a checkpoint of another model,
# a module to isolate that the model does not have.
. "$(dirname "$0")/torch-lib.sh"
# expect_error PATTERN ARGS...: the example fails, and its stderr matches PATTERN.
expect_error() {
  local pattern=$1
  shift
  if "$PYTHON" "$EXAMPLE" "$@" >/dev/null 2>"$WORK/example.err"; then fail "gpt_moe.py $* succeeded"; fi
  grep -q -- "$pattern" "$WORK/example.err" || { cat "$WORK/example.err" >&2; fail "stderr lacks: $pattern"; }
}
DTRACE_LIBRARY=/nonexistent/libdtrace.so expect_error "LibraryNotFound: libdtrace could not be loaded.*DTRACE_LIBRARY" \
  --steps 1 --run-dir x
ex --steps 3 --run-dir a --checkpoint-dir ckpt --checkpoint-every 2
before=$(sha256sum a/rank0.jsonl)
expect_error "RecorderError: .*a/rank0.jsonl" --steps 1 --run-dir a
[ "$(sha256sum a/rank0.jsonl)" = "$before" ] || fail "the existing run was modified"
mkdir empty
DTRACE_REPLAY_STEP=1 DTRACE_OUT=r.jsonl expect_error "CheckpointError: DTRACE_REPLAY_STEP=1: no checkpoint at or before step 1 in empty" \
  --steps 3 --run-dir a --checkpoint-dir empty
DTRACE_RESUME_AT=2 expect_error "CheckpointError: .*step-2.pt: written for another model" \
  --steps 3 --width 16 --run-dir b --checkpoint-dir ckpt
mkdir cap
DTRACE_REPLAY_STEP=1 DTRACE_LEVEL=kernel DTRACE_SCOPE=fwd/blocks.0.moe DTRACE_CAPTURE=cap DTRACE_OUT=c.jsonl \
  ex --steps 3 --run-dir a --checkpoint-dir ckpt
DTRACE_REPLAY_STEP=1 DTRACE_ISOLATE=fwd/blocks.7.moe DTRACE_INPUTS=cap DTRACE_OUT=i.jsonl \
  expect_error "CaptureError: DTRACE_ISOLATE: no module named 'blocks.7.moe'" \
  --steps 3 --run-dir a --checkpoint-dir ckpt
ex --steps 2 --width 16 --run-dir a16 --checkpoint-dir ckpt16
DTRACE_REPLAY_STEP=1 DTRACE_ISOLATE=fwd/blocks.0.moe DTRACE_INPUTS=cap DTRACE_OUT=w.jsonl \
  expect_error "CaptureError: the captured inputs of fwd/blocks.0.moe do not fit module blocks.0.moe" \
  --steps 3 --width 16 --run-dir a16 --checkpoint-dir ckpt16
[ "$(sha256sum a/rank0.jsonl)" = "$before" ] || fail "the existing run was modified"
echo ok
