#!/usr/bin/env bash
# `dtrace verify --timeout S` and `dtrace tax --timeout S`: an arm that runs
# longer is stopped, with its processes, and is trouble: exit 2 and one line
# naming the arm and the limit, well before the arm would have ended.
. "$(dirname "$0")/minitrain-lib.sh"
cat >slow.sh <<SH
#!/bin/sh
echo \$\$ >>"$WORK/pids"
sleep 60 &
echo \$! >>"$WORK/pids"
wait
SH
chmod +x slow.sh

# alive PID: PID is a process that is not a zombie (read from /proc: procps
# may be missing, and a check that cannot look must fail, not pass).
[ -r /proc/self/stat ] || fail "/proc is not mounted: cannot check for processes left running"
alive() {
  local stat
  stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
  stat=${stat##*) }
  [ "${stat%% *}" != Z ]
}

for command in verify tax; do
  first_arm=arm1
  [ "$command" = tax ] && first_arm=deterministic.1
  : >"$WORK/pids"
  start=$SECONDS
  expect_status 2 "$DTRACE" "$command" --timeout 1 -- "$WORK/slow.sh"
  [ $((SECONDS - start)) -lt 30 ] || fail "$command --timeout 1 took $((SECONDS - start)) s"
  # One error line (the progress lines before it are dtrace: info:).
  [ "$(grep -c '^dtrace: error: ' err.txt)" = 1 ] || fail "$command: trouble must be one error line: $(cat err.txt)"
  grep -qx "dtrace: error: arm $first_arm failed (timed out after 1 s)" err.txt ||
    fail "$command: the error does not name the arm and its limit: $(cat err.txt)"
  [ ! -s out.txt ] || fail "$command: trouble printed on stdout: $(cat out.txt)"
  [ -s "$WORK/pids" ] || fail "$command: the arm never ran"
  while read -r pid; do
    ! alive "$pid" || fail "$command: the arm's process $pid still runs"
  done <"$WORK/pids"
done
echo ok
