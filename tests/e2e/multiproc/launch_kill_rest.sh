#!/usr/bin/env bash
# A launcher that stops the job when one of its ranks fails, as torchrun and
# most launchers do: as launch.sh, but at the first rank that ends with a
# status other than 0 it sends SIGTERM to the others (Python dies of it, writing
# nothing), waits for them and exits 1. MP_DTRACE_PID is its parent, dtrace in
# a replay (worker.py's MP_WAIT_WATCHED).
#   launch_kill_rest.sh N PROGRAM ARG...
n=$1
shift
shared=$(mktemp -d "${TMPDIR:-/tmp}/mp-shared.XXXXXX") || exit 2
export MP_SHARED="$shared" WORLD_SIZE="$n" MP_DTRACE_PID=$PPID
pids=()
for ((r = 0; r < n; r++)); do
  RANK=$r "$@" &
  pids+=($!)
done
status=0
for ((r = 0; r < n; r++)); do
  if ! wait -n; then
    kill -TERM "${pids[@]}" 2>/dev/null
    status=1
    break
  fi
done
wait
rm -rf "$shared"
exit "$status"
