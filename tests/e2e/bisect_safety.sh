#!/usr/bin/env bash
# The replay command comes from a log: bisect runs it only with --trust or an
# explicit --replay; a crashing or hanging workload is exit 2 with what it said;
# temporary files are removed unless --keep names a directory.
. "$(dirname "$0")/bisect-lib.sh"
export TMPDIR=$WORK/tmp
mkdir -p "$TMPDIR"
mt --steps 2 --nondet splitk --out a
mt --steps 2 --nondet splitk --out b

run_dtrace 2 bisect a b
trouble_is "the replay command comes from the log of run A"
err_has "pass --trust"

cat >crash.sh <<'SH'
#!/bin/sh
echo "out of memory in layer 3" >&2
exit 3
SH
chmod +x crash.sh
run_dtrace 2 bisect --replay "$WORK/crash.sh" a b
# minitrain's header announces replay sessions, so the replay was a session's
# first request, and the failure names it (E2E_REPLAYS=launches: a launch).
if [ "${E2E_REPLAYS:-}" = launches ]; then
  err_has "replay of run A (layer) failed: exit 3"
else
  err_has "replay of run A (layer) failed in request 0 of its replay session (step 0, level layer): exit 3"
fi
err_has "out of memory in layer 3"

cat >hang.sh <<'SH'
#!/bin/sh
sleep 60
SH
chmod +x hang.sh
run_dtrace 2 bisect --timeout 0.5 --replay "$WORK/hang.sh" a b
err_has "timed out"
[ -z "$(ls -A "$TMPDIR")" ] || fail "temporary files left: $(ls "$TMPDIR")"

run_dtrace 0 bisect --trust --keep kept a b
# One capture index per rank (dtrace-replay/1.1).
[ -f kept/capture-A/capture.rank0.jsonl ] || fail "--keep did not keep the captures"
run_dtrace 2 bisect --trust --keep kept a b
trouble_is "kept: --keep needs a new or empty directory"
[ -z "$(ls -A "$TMPDIR")" ] || fail "temporary files left: $(ls "$TMPDIR")"
echo ok
