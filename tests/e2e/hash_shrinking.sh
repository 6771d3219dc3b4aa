#!/bin/bash
# A file that shrinks while `dtrace hash` reads it (a job still writing or
# rotating it): trouble in one line naming the file, exit 2, and the digests
# of the files before it still printed; it used to die of SIGBUS.
. "$(dirname "$0")/lib.sh"
printf 'abc' >small
truncate -s 64G big   # sparse: no disk, and far more than a second of hashing
# Eight threads, so that several meet the shrunk file at once: the message is
# still written once (it was written by each thread that met it).
"$DTRACE" hash --threads 8 small big >"$OUT" 2>"$ERR" &
pid=$!
# Shrink it once dtrace has it mapped (its /proc/PID/maps names the file):
# then the hashing of big has begun, however slow the machine.
waited=0
until grep -qF -- "$(pwd -P)/big" "/proc/$pid/maps" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || fail "dtrace hash ended before it mapped big"
  [ "$waited" -lt 600 ] || fail "dtrace hash did not map big within 30 s"
  sleep 0.05
  waited=$((waited + 1))
done
truncate -s 0 big
got=0
wait "$pid" || got=$?
[ "$got" = 2 ] || fail "hash of a shrinking file: exit $got, expected 2"
trouble_line=$(cat "$ERR")
[ "$trouble_line" = "dtrace: error: big: the file shrank while it was being hashed" ] ||
  fail "unexpected stderr"
[ "$(cat "$OUT")" = "$("$DTRACE" hash small)" ] || fail "the digest of the file before it was lost"
echo ok
