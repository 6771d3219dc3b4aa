#!/usr/bin/env bash
# A replay through a real torchrun (python3 -m torch.distributed.run with the
# flags docs/torch.md documents) in which rank 1 of 3 exits 3 mid-replay
# (multiproc/capi_rank.py, on libdtrace's recorder: its status file says
# "exit 3 TIME" as it exits) while ranks 0 and 2 wait for it: bisect exits 2
# naming rank 1 and its exit status, with rank 1's own stderr when it wrote
# rank1.stderr, and else that it wrote none, torchrun's stderr (where the
# ranks' went) shown as the launcher's.
. "$(dirname "$0")/torch-lib.sh"
if ! "$PYTHON" -c 'import torch.distributed.run' 2>/dev/null; then
  echo "SKIP: $PYTHON has no torch.distributed.run"
  exit 77
fi
MP=$SOURCE_ROOT/tests/e2e/multiproc
"$MP/launch.sh" 3 python3 "$MP/worker.py" --steps 2 --out a --planted 2 || fail "run a"
"$MP/launch.sh" 3 python3 "$MP/worker.py" --steps 2 --out b --planted 2 || fail "run b"
run_dtrace 1 diff a b
TORCHRUN=$(torchrun 3)
REPLAY="$TORCHRUN $PYTHON $MP/capi_rank.py $BUILD_ROOT/src/capi/libdtrace.so"

MP_EXIT_RANK=1 MP_OWN_STDERR=1 run_dtrace 2 bisect --replay "$REPLAY" --timeout 120 a b
err_has "failed: rank 1 exited with status 3"
err_has "rank 1's stderr ends with:"
err_has "rank 1: leaving the replay with status 3"
grep -q "launcher's stderr" "$ERR" && fail "the launcher's stderr is shown beside rank 1's own"

# torchrun ends ranks 0 and 2 (SIGTERM) while dtrace is stopped: all three
# have failed when it looks, rank 1 having written its exit first and the
# others killed after it (named by their status files' modification times,
# their last progress, rank 0 or 2 came first).
MP_EXIT_RANK=1 MP_OWN_STDERR=1 MP_STOP_DTRACE=1 run_dtrace 2 bisect --replay "$REPLAY" --timeout 120 a b
grep -qE "failed: rank 1 exited with status 3 \(then ranks (0, 2|2, 0) failed too\)" "$ERR" ||
  fail "rank 1 not named first of the three: $(head -1 "$ERR")"
err_has "rank 1's stderr ends with:"

MP_EXIT_RANK=1 run_dtrace 2 bisect --replay "$REPLAY" --timeout 120 a b
err_has "failed: rank 1 exited with status 3"
err_has "rank 1 wrote no rank1.stderr; the launcher's stderr ends with:"
err_has "rank 1: leaving the replay with status 3"
echo ok
