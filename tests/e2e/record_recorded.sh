#!/bin/bash
# dtrace record, CMD recorded: exit 0, nothing on stdout, the ranks and steps
# (the log library's summary) and the next command on stderr.
. "$(dirname "$0")/record-lib.sh"

run_dtrace 0 record --out runs/a -- sh -c 'cp "$0"/rank*.jsonl "$DTRACE_RUN_DIR"/' "$TESTDATA/check/clean"
[ ! -s "$OUT" ] || fail "record printed on stdout"
err_has "dtrace: info: recorded 2 ranks, steps 0-2, in runs/a"
err_has "dtrace diff runs/a OTHER"
! grep -qF "not complete" "$ERR" || fail "a complete run called incomplete"

# One rank of two: said.
run_dtrace 0 record --out runs/b -- sh -c 'cp "$0"/rank0.jsonl "$DTRACE_RUN_DIR"/' "$TESTDATA/check/clean"
err_has "recorded 1 rank of 2, steps 0-2, in runs/b"
err_has "the recording is not complete"

# A rank file that is not a log: trouble naming it, the file kept.
run_dtrace 2 record --out runs/c -- sh -c 'echo "not json" >"$DTRACE_RUN_DIR/rank0.jsonl"'
err_has "dtrace: error: the run runs/c cannot be read: "
err_has "rank0.jsonl"
[ "$(cat runs/c/rank0.jsonl)" = "not json" ] || fail "the rank file was touched"
echo ok
