#!/bin/bash
# dtrace record, CMD failed: exit 2 and how CMD ended, after the error each of
# its Python processes noted; what it recorded stays.
. "$(dirname "$0")/record-lib.sh"

run_dtrace 2 record --out runs/a -- sh -c 'exit 3'
trouble_is "sh -c exit 3 exited with status 3"
[ -d runs/a ] || fail "--out was not created"

run_dtrace 2 record --out runs/a -- sh -c 'kill -9 $$'
trouble_is 'sh -c kill -9 $$ was killed by signal 9 (Killed)'

run_dtrace 2 record --out runs/a -- "$WORK/no-such-command"
trouble_is "cannot run $WORK/no-such-command: No such file or directory"

# The error the recorder stopped the program with comes first.
why="step 3 reached optimizer.step() with no backward() since its first forward"
STANDIN_NOTE="{\"optimizers\": 1, \"error\": \"$why\"}" \
  run_dtrace 2 record --out runs/a -- "$PY" -c 'import sys; sys.exit(1)'
[ "$(wc -l <"$ERR")" = 2 ] || fail "expected the note's error and CMD's status"
head -1 "$ERR" | grep -qF "dtrace: error: process " || fail "the first line is not the process's error"
head -1 "$ERR" | grep -qF "(-c): $why" || fail "the first line lacks the note's error"
sed -n 2p "$ERR" | grep -qF "dtrace: error: $PY -c import sys; sys.exit(1) exited with status 1" ||
  fail "the second line is not CMD's status"

# A CMD that recorded, then failed: its file stays, and record says so.
run_dtrace 2 record --out runs/b -- sh -c 'echo partial >"$DTRACE_RUN_DIR/rank0.jsonl"; exit 4'
err_has "exited with status 4"
err_has "what it recorded stays in runs/b"
[ "$(cat runs/b/rank0.jsonl)" = partial ] || fail "the rank file was touched"
echo ok
