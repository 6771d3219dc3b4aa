#!/usr/bin/env bash
# `dtrace bisect --replay` with a workload that hangs, crashes, writes garbage
# or writes nothing: exit 2 with a message naming what went wrong, no temporary
# files left in TMPDIR, and no process of the workload left running (the
# runner kills the replay's process group, the processes that left it by
# DTRACE_REPLAY_TAG, and whatever else is left below dtrace, its subreaper: a
# process in a session of its own with an empty environment). The same when
# dtrace itself is stopped by a signal while a replay runs; a process the
# replays did not start is left running.
. "$(dirname "$0")/minitrain-lib.sh"

mt --steps 2 --nondet splitk --out a
mt --steps 2 --nondet splitk --out b
expect_status 1 "$DTRACE" diff a b

# Fake workloads: each records its pid (and a child's) in $MARKS.
MARKS=$WORK/marks
mkdir -p "$MARKS" fake
cat >fake/hang.sh <<'SH'
#!/bin/sh
sleep 1000 &
echo $! >"$MARKS/hang.child"
# A daemon in a session of its own, outside the replay's process group.
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! >"$MARKS/hang.daemon"
# One that carries nothing of the replay's: setsid(2), then execve with an
# empty environment (no DTRACE_REPLAY_TAG); dtrace, its subreaper, still ends it.
setsid env -i sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! >"$MARKS/hang.bare"
echo $$ >"$MARKS/hang.pid"
wait
SH
cat >fake/crash.sh <<'SH'
#!/bin/sh
echo $$ >"$MARKS/crash.pid"
echo "about to crash" >&2
kill -SEGV $$
SH
cat >fake/garbage.sh <<'SH'
#!/bin/sh
echo $$ >"$MARKS/garbage.pid"
printf 'this is not a log\n\001\002\003' >"$DTRACE_OUT"
SH
cat >fake/binary.sh <<'SH'
#!/bin/sh
echo $$ >"$MARKS/binary.pid"
# Starts with a byte that is not a newline: the error must name line 1 (raw
# random bytes began with one about once in 256 runs and named line 2).
{ printf 'x'; head -c 100000 /dev/urandom; } >"$DTRACE_OUT"
SH
cat >fake/nothing.sh <<'SH'
#!/bin/sh
echo $$ >"$MARKS/nothing.pid"
# Left behind by a workload that exits: one in its group, one escaped.
sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! >"$MARKS/nothing.child"
setsid sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! >"$MARKS/nothing.daemon"
setsid env -i sleep 1000 </dev/null >/dev/null 2>&1 &
echo $! >"$MARKS/nothing.bare"
exit 0
SH
chmod +x fake/*.sh
export MARKS

# process_state PID: the one-letter state of PID from /proc/PID/stat (R, S,
# Z, ...) or "gone". Read from /proc, not ps: procps is missing from minimal
# images, and a check that cannot look must fail, not see nothing. Killed
# processes whose parent died first wait as zombies (Z) for init to reap them.
[ -r /proc/self/stat ] || fail "/proc is not mounted: cannot check for processes left running"
process_state() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || { echo gone; return; }
  # The command name (2nd field) is in parentheses and may hold spaces.
  stat=${stat##*) }
  echo "${stat%% *}"
}
# The check sees a live process: this script's own shell is running or sleeping.
case "$(process_state $$)" in
  R | S) ;;
  *) fail "process_state cannot see this shell: $(process_state $$)" ;;
esac

# bisect_fails NAME EXPECTED: bisect with fake/NAME.sh exits 2, its one-line
# error contains EXPECTED, and it leaves no temp file or process behind.
# SIGNAL: dtrace is sent SIGNAL once the workload has started.
bisect_fails() {
  local name=$1 want=$2 signal=${3:-} tmp=$WORK/tmp-$1${3:-}
  mkdir -p "$tmp"
  rm -f "$MARKS/$name".*
  local got=0 start=$SECONDS
  # --launches: the fake workloads write DTRACE_OUT as a launch does; none
  # serves the replay sessions minitrain's headers announce.
  # exec: a background job of a script starts with SIGINT ignored; dtrace
  # leaves an ignored signal ignored, as a user's Ctrl-C would not be.
  TMPDIR=$tmp python3 -c 'import os, signal, sys
signal.signal(signal.SIGINT, signal.SIG_DFL)
os.execv(sys.argv[1], sys.argv[1:])' "$DTRACE" bisect --launches --replay "$WORK/fake/$name.sh" --timeout 3 a b \
    >"$WORK/out.txt" 2>"$WORK/err.txt" &
  local dtrace_pid=$!
  if [ -n "$signal" ]; then
    local waited=0
    # -s, not -e: the file exists as soon as the shell opens it, before its
    # pid is written; a signal in between killed the workload with its pid
    # file empty, and the check below then read no pid (seen under load).
    while [ ! -s "$MARKS/$name.pid" ]; do
      [ "$waited" -lt 600 ] || fail "$name: the workload did not start within 30 s"
      sleep 0.05
      waited=$((waited + 1))
    done
    kill -"$signal" "$dtrace_pid"
  fi
  wait "$dtrace_pid" || got=$?
  [ "$got" = 2 ] || { cat "$WORK/err.txt" >&2; fail "$name: exit $got, expected 2"; }
  grep -q "^dtrace: error: .*$want" "$WORK/err.txt" ||
    { cat "$WORK/err.txt" >&2; fail "$name: the error does not say '$want'"; }
  [ -z "$(ls -A "$tmp")" ] || fail "$name: left in TMPDIR: $(ls -A "$tmp")"
  [ $((SECONDS - start)) -lt 60 ] || fail "$name: took $((SECONDS - start)) s"
  local pidfile
  for pidfile in "$MARKS/$name".*; do
    [ -e "$pidfile" ] || fail "$name: the workload did not run"
    local state
    state=$(process_state "$(cat "$pidfile")")
    case "$state" in
      gone | Z) ;;
      *) fail "$name: process $(cat "$pidfile") ($(basename "$pidfile")) still runs (state $state)" ;;
    esac
  done
}

# A process of the user's, not of the replay, is left alone.
sleep 1000 </dev/null >/dev/null 2>&1 &
unrelated=$!
bisect_fails hang "timed out after 3 s"
bisect_fails hang "interrupted by signal 2 (Interrupt)" INT
bisect_fails hang "interrupted by signal 15 (Terminated)" TERM
bisect_fails crash "killed by signal 11"
grep -q "about to crash" "$WORK/err.txt" || fail "crash: its stderr is not shown"
bisect_fails garbage "not valid JSON"
bisect_fails binary ":1: "
bisect_fails nothing "exited 0 but wrote nothing to DTRACE_OUT"
case "$(process_state "$unrelated")" in
  R | S) kill "$unrelated" ;;
  *) fail "a process the replays did not start was killed (state $(process_state "$unrelated"))" ;;
esac
echo ok
