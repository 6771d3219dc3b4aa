#!/bin/sh
# A plain launcher, as a job's own script would be: starts N copies of a
# program with RANK, WORLD_SIZE and a shared directory for their collectives
# (MP_SHARED, under TMPDIR), waits for all of them, exits 1 if any failed.
# It knows nothing of dtrace: the ranks speak dtrace-replay/1.1 themselves.
#   launch.sh N PROGRAM ARG...
n=$1
shift
shared=$(mktemp -d "${TMPDIR:-/tmp}/mp-shared.XXXXXX") || exit 2
export MP_SHARED="$shared" WORLD_SIZE="$n"
pids=""
r=0
while [ "$r" -lt "$n" ]; do
  RANK=$r "$@" &
  pids="$pids $!"
  r=$((r + 1))
done
status=0
for pid in $pids; do
  wait "$pid" || status=1
done
rm -rf "$shared"
exit "$status"
