#!/bin/bash
# Run directories holding what is not a log file: a symlink loop, a directory,
# a FIFO (opening it would block forever) or a dangling link named *.jsonl are
# skipped with a note naming them; a file that cannot be read is trouble
# naming it; a run path that is one of these is trouble naming it.
. "$(dirname "$0")/lib.sh"
CLEAN=$TESTDATA/check/clean
cp -r "$CLEAN" run

ln -s loop.jsonl run/loop.jsonl
mkdir run/sub.jsonl
mkfifo run/pipe.jsonl
ln -s nowhere.jsonl run/dangling.jsonl
run_dtrace 0 check --json run
json_true 'any(n.startswith("run/loop.jsonl: ") and "symbolic links" in n for n in d["notes"])'
json_true '"run/sub.jsonl: a directory, ignored" in d["notes"]'
json_true '"run/pipe.jsonl: a FIFO, ignored" in d["notes"]'
json_true '"run/dangling.jsonl: a dangling symbolic link, ignored" in d["notes"]'
run_dtrace 0 diff "$CLEAN" run
out_has "run/pipe.jsonl: a FIFO, ignored"

# A directory with nothing but such entries.
mkdir only
mkfifo only/rank0.jsonl
run_dtrace 2 check only
trouble_is "only/rank0.jsonl: a FIFO, not a file: only has no *.jsonl file to read"

# The run path itself.
ln -s self self
run_dtrace 2 diff "$CLEAN" self
trouble_is "self: cannot open: Too many levels of symbolic links"
mkfifo fifo
run_dtrace 2 check fifo
trouble_is "fifo: a FIFO, not a run"
run_dtrace 2 show /dev/null
trouble_is "/dev/null: a character device, not a run"

# A file that cannot be read. /proc/self/mem fails to read at offset 0 even
# for root (tests run as root in CI, where chmod 000 stops nothing).
cp -r "$CLEAN" eio
ln -sf /proc/self/mem eio/rank1.jsonl
run_dtrace 2 check eio
trouble_is "eio/rank1.jsonl: read failed: Input/output error"
if [ "$(id -u)" != 0 ]; then
  cp -r "$CLEAN" locked
  chmod 000 locked/rank1.jsonl
  run_dtrace 2 diff "$CLEAN" locked
  trouble_is "locked/rank1.jsonl: cannot open: Permission denied"
else
  echo "running as root: chmod 000 does not stop root; the unreadable file is /proc/self/mem"
fi

# dtrace's own state file, damaged: bisect without runs says there is no last diff.
mkdir -p .dtrace
echo '{"run_a":1,"run_b":[],"step":"x","rank":99999999999}' >.dtrace/last-diff.json
run_dtrace 2 bisect
trouble_is "no runs given and no earlier \`dtrace diff\`"
printf '\0\0garbage' >.dtrace/last-diff.json
run_dtrace 2 bisect
trouble_is "no runs given and no earlier \`dtrace diff\`"

# The state file as a FIFO: bisect does not block opening it (nor reading a device).
rm -f .dtrace/last-diff.json
mkfifo .dtrace/last-diff.json
got=0
timeout 20 "$DTRACE" bisect >"$OUT" 2>"$ERR" || got=$?
[ "$got" = 2 ] || fail "bisect with a FIFO for its state: exit $got, expected 2"
trouble_is "no runs given and no earlier \`dtrace diff\`"
rm .dtrace/last-diff.json
ln -s /dev/zero .dtrace/last-diff.json
run_dtrace 2 bisect
trouble_is "no runs given and no earlier \`dtrace diff\`"
rm .dtrace/last-diff.json

# A link left where diff writes its state's temporary (a shared directory):
# diff does not write through it into the file it names, and still saves its state.
echo precious >precious.txt
ln -s "$WORK/precious.txt" .dtrace/last-diff.json.tmp
run_dtrace 0 diff "$CLEAN" run
[ "$(cat precious.txt)" = precious ] || fail "diff wrote through .dtrace/last-diff.json.tmp into precious.txt"
[ ! -e .dtrace/last-diff.json.tmp ] || fail ".dtrace/last-diff.json.tmp left behind"
grep -q '"run_b"' .dtrace/last-diff.json || fail "diff did not save its state"
# And a FIFO there does not block it.
mkfifo .dtrace/last-diff.json.tmp
got=0
timeout 20 "$DTRACE" diff "$CLEAN" run >"$OUT" 2>"$ERR" || got=$?
[ "$got" = 0 ] || fail "diff with a FIFO for its state's temporary: exit $got, expected 0"
echo ok
