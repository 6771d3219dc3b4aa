#!/bin/bash
# An empty .jsonl file in a run is noted and ignored.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/empty_file

run_dtrace 0 diff --json "$D/a" "$D/b"
identical_over 0 2 3 2 30
json_true 'any(n.endswith("b/rank2.jsonl: empty file, ignored") for n in d["notes"])'
