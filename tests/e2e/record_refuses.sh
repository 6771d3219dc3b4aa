#!/bin/bash
# dtrace record refuses, before CMD runs: no --out, an --out that holds a
# recording (left untouched), an --out that is a file, a Python directory
# without the bootstrap, a bad --level.
. "$(dirname "$0")/record-lib.sh"

run_dtrace 2 record -- touch ran
trouble_is "--out DIR is required"

mkdir -p runs/a
cp "$TESTDATA/check/clean/rank1.jsonl" runs/a/
run_dtrace 2 record --out runs/a -- touch ran
trouble_is "--out runs/a already holds a recording ($WORK/runs/a/rank1.jsonl)"
cmp -s "$TESTDATA/check/clean/rank1.jsonl" runs/a/rank1.jsonl || fail "the recorded file was modified"

: >afile
run_dtrace 2 record --out afile -- touch ran
trouble_is "--out afile: exists and is not a directory"

mkdir empty
DTRACE_PYTHONPATH=$WORK/empty run_dtrace 2 record --out runs/c -- touch ran
trouble_is "no $WORK/empty/dtrace_torch/bootstrap/sitecustomize.py (the Python directory of DTRACE_PYTHONPATH)"

run_dtrace 2 record --level steps --out runs/c -- touch ran
err_has "--level"
[ ! -e ran ] || fail "CMD ran though record refused"
echo ok
