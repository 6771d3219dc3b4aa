#!/usr/bin/env bash
# A replay through a launcher that stops the other ranks when one fails
# (multiproc/launch_kill_rest.sh, as torchrun does): rank 1 of 3 fails and the
# launcher kills ranks 0 and 2 right after, so all three have failed when
# dtrace looks. 20 trials, each of the ways rank 1 can end (exit 3 written as
# the recorder writes it, os._exit(3) writing nothing, SIGKILL), and bisect
# names rank 1 every time, with its own stderr: the killed ranks' status files
# keep the time of their last progress, which named rank 0 or 2 about half the
# time when failures were ordered by modification time. Rank 1 fails once
# dtrace watches every rank (MP_WAIT_WATCHED: mid-replay, never before dtrace
# saw the ranks start), so no trial depends on timing.
. "$(dirname "$0")/lib.sh"
MP=$SOURCE_ROOT/tests/e2e/multiproc

"$MP/launch.sh" 3 python3 "$MP/worker.py" --steps 2 --out a --planted 2 || fail "run a"
"$MP/launch.sh" 3 python3 "$MP/worker.py" --steps 2 --out b --planted 2 || fail "run b"
run_dtrace 1 diff a b
REPLAY="$MP/launch_kill_rest.sh 3 python3 $MP/worker.py --steps 2 --out a --planted 2"

named=0
for trial in $(seq 1 20); do
  case $((trial % 3)) in
    0) mode=MP_EXIT_RANK how="rank 1 exited with status 3" ;;
    1) mode=MP_OSEXIT_RANK how="rank 1 (exited with status 3|ended without writing its exit status)" ;;
    2) mode=MP_KILL_RANK how="rank 1 (was killed by signal 9|ended without writing its exit status)" ;;
  esac
  got=0
  env "$mode=1" MP_WAIT_WATCHED=1 "$DTRACE" bisect --replay "$REPLAY" --timeout 60 a b >"$OUT" 2>"$ERR" || got=$?
  [ "$got" = 2 ] || { cat "$ERR" >&2; fail "trial $trial ($mode): exit $got, expected 2"; }
  if grep -qE "failed: $how" "$ERR"; then
    named=$((named + 1))
  else
    echo "trial $trial ($mode): $(head -1 "$ERR")" >&2
  fi
  # Rank 1's own stderr, or that it is empty: never the launcher's in its place.
  if [ "$mode" = MP_KILL_RANK ]; then
    err_has "rank 1's stderr (rank1.stderr) is empty"
  else
    err_has "rank 1's stderr ends with:"
    err_has "rank 1: planted exit 3 before step 0"
  fi
done
[ "$named" = 20 ] || fail "rank 1 named in $named of 20 trials"
echo "rank 1 named in 20 of 20 trials"
echo ok
