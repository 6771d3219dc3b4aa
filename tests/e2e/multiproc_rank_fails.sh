#!/usr/bin/env bash
# A replay through a launcher in which rank 1 of 3 fails, dies by a signal, or
# hangs (multiproc/worker.py: MP_FAIL_RANK, MP_KILL_RANK, MP_HANG_RANK act only
# in replays): `dtrace bisect` exits 2 naming rank 1, how it ended and the last
# lines of its stderr; a failure stops the replay at once (long before the
# 60 s timeout) while ranks 0 and 2 still wait for rank 1 in their all-reduce;
# a hang is named at the timeout as the rank furthest behind. No process of the
# replay is left (looked up in /proc by a variable only they carry) and nothing
# is left in TMPDIR.
. "$(dirname "$0")/lib.sh"
MP=$SOURCE_ROOT/tests/e2e/multiproc

"$MP/launch.sh" 3 python3 "$MP/worker.py" --steps 2 --out a --planted 2 || fail "run a"
"$MP/launch.sh" 3 python3 "$MP/worker.py" --steps 2 --out b --planted 2 || fail "run b"
run_dtrace 1 diff a b

# The pids of live processes carrying MP_TEST_MARK=$1 in their environment.
marked() {
  python3 - "$1" <<'PY'
import os, sys
mark = ("MP_TEST_MARK=" + sys.argv[1]).encode()
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        cmd = open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode()
    except OSError:
        continue
    if mark in env:
        print(pid, cmd)
PY
}

# replay_fails CASE VARIABLE TIMEOUT LIMIT EXPECTED...: bisect with VARIABLE=1
# exits 2 within LIMIT seconds, its error has every EXPECTED text, and it
# leaves no process and no temporary file.
replay_fails() {
  local name=$1 variable=$2 timeout=$3 limit=$4
  shift 4
  local tmp=$WORK/tmp-$name mark="$name-$$-$RANDOM"
  mkdir -p "$tmp"
  local start got=0
  start=$(date +%s%N)
  env "$variable=1" MP_TEST_MARK="$mark" TMPDIR="$tmp" \
    "$DTRACE" bisect --trust --timeout "$timeout" a b >"$OUT" 2>"$ERR" || got=$?
  local took=$((($(date +%s%N) - start) / 1000000))
  [ "$got" = 2 ] || fail "$name: exit $got, expected 2"
  local want
  for want in "$@"; do err_has "$want"; done
  [ "$took" -lt $((limit * 1000)) ] || fail "$name: took $took ms, more than $limit s"
  local left
  left=$(marked "$mark")
  [ -z "$left" ] || fail "$name: processes of the replay still run: $left"
  [ -z "$(ls -A "$tmp")" ] || fail "$name: left in TMPDIR: $(ls -A "$tmp")"
  echo "$name: exit 2 after $took ms"
}

replay_fails error MP_FAIL_RANK 60 30 \
  "rank 1 exited with status 1" "rank 1's stderr ends with" "RuntimeError: planted failure on rank 1"
replay_fails killed MP_KILL_RANK 60 30 "rank 1 "
grep -qE "rank 1 (was killed by signal 9|ended without writing its exit status)" "$ERR" ||
  fail "killed: the error does not say how rank 1 ended"
replay_fails hang MP_HANG_RANK 5 30 \
  "timed out after 5 s: rank 1 hangs (at step 0 after 4 records)" "ranks 0, 2 waited for it"
echo ok
