#!/bin/bash
# A directory without *.jsonl files (here a README and a .json file) is not a run: exit 2.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/no_jsonl

run_dtrace 2 diff "$D/a" "$D/b"
trouble_is "$D/a: a directory without *.jsonl files is not a run"
