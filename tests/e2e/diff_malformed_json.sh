#!/bin/bash
# A line that is not JSON (a trailing comma), and not the last line, is trouble: exit 2 naming file and line.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/malformed_json

run_dtrace 2 diff "$D/a" "$D/b"
trouble_is "$D/b/rank0.jsonl:5: not valid JSON"
