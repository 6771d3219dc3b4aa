#!/usr/bin/env bash
# How a replay that dies is reported (issue 38): the NumPy example
# (examples/numpy/numpytrain.py), one process that is rank 0 itself, with a
# fault planted by faulty_numpytrain.py: os._exit(5) or SIGSEGV, which write
# no exit status, in a replay session's request or between two requests, and in
# a launch (--launches). Each is named by its exit status or signal, as a launch
# of the same process is, beside the request that failed and what it asked;
# the replay command's stderr is the rank's own. A program that cannot isolate
# (no isolate=) fails with its stderr named as the rank's, sessions and launches.
. "$(dirname "$0")/python-lib.sh"
need_python_module numpy "tools/setup-deps.sh installs Debian's python3-numpy"
FAULTY="$(dirname "$0")/faulty_numpytrain.py"
export SOURCE_ROOT

for r in a b; do
  seed=$([ $r = a ] && echo 1 || echo 2)
  "$PYTHON" "$FAULTY" --run-dir $r --checkpoint-dir c$r --steps 1 --level layer --planted --chaos-seed "$seed" \
    >/dev/null 2>"$WORK/$r.err" || { cat "$WORK/$r.err" >&2; fail "recording run $r"; }
done

# bisect_fails FAULT ARGS...: bisect a b with FAULT planted fails (exit 2).
bisect_fails() {
  local fault=$1; shift
  FAULT=$fault run_dtrace 2 bisect --trust "$@" a b
}

# In request 1 (the capture of run A), once it has read the request.
bisect_fails exit:in:1
err_has "replay of run A (capture) failed in request 1 of its replay session (step 0, level kernel, scope fwd/layer.1, capture): rank 0 exited with status 5;"
err_has "rank 0's stderr (the replay command's own) ends with:"
err_has "faulty: exit in request 1"
bisect_fails segv:in:0
err_has "replay of run A (layer) failed in request 0 of its replay session (step 0, level layer): rank 0 was killed by signal 11 (Segmentation fault);"
# Between requests 0 and 1: after answering the first.
bisect_fails exit:after:0
err_has "failed in request 1 of its replay session (step 0, level kernel, scope fwd/layer.1, capture): rank 0 exited with status 5 after answering request 0, before it read the next"
bisect_fails segv:after:0
err_has "rank 0 was killed by signal 11 (Segmentation fault) after answering request 0, before it read the next"
err_has "faulty: segv after request 0"
# Launches: the same process, the same words.
bisect_fails exit:in:0 --launches
err_has "replay of run A (layer) failed: rank 0 exited with status 5;"
bisect_fails segv:in:0 --launches
err_has "replay of run A (layer) failed: rank 0 was killed by signal 11 (Segmentation fault);"

# isolate= not passed: the workload's own error, on the rank's own stderr.
for r in g h; do
  seed=$([ $r = g ] && echo 1 || echo 2)
  "$PYTHON" "$SOURCE_ROOT/examples/numpy/numpytrain.py" --run-dir $r --checkpoint-dir c$r --steps 1 --level layer \
    --planted --chaos-seed "$seed" --no-isolate >/dev/null 2>"$WORK/$r.err" || { cat "$WORK/$r.err" >&2; fail "run $r"; }
done
for mode in "" --launches; do
  run_dtrace 2 bisect --trust $mode g h
  err_has "rank 0 exited with status 2; rank 0 wrote no rank0.stderr; rank 0's stderr (the replay command's own) ends with:"
  ! grep -qF "the launcher's stderr" "$ERR" || fail "the rank's own stderr named as the launcher's"
done
echo ok
