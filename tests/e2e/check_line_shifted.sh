#!/bin/bash
# Every end record's `line` one more than the line it is on (a writer that
# counted from 2). Each step's own number agrees with its neighbours', so a
# search would name every record one line off; check counts every line and
# reports a line-mismatch at every step.
. "$(dirname "$0")/check-lib.sh"
D=$WORK/run
cp -r "$TESTDATA/minitrain/same-a" "$D"
python3 - "$D/rank0.jsonl" <<'PY' || fail "shifting lines"
import re, sys
text = open(sys.argv[1]).read()
open(sys.argv[1], "w").write(re.sub(r'"line":([0-9]+)', lambda m: '"line":%d' % (int(m.group(1)) + 1), text))
PY
run_dtrace 1 check "$D"
out_has "line-mismatch: $D/rank0.jsonl:153: rank 0, step 1: end record says it is line 154, it is line 153"
run_dtrace 1 check --json "$D"
json_is violation_counts '{"line-mismatch": 3}'
