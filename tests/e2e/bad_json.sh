#!/bin/bash
# JSON no recorder writes: nesting deeper than any parser allows, numbers too
# large for their field, huge numbers in ignored fields, a header twice, no
# header. Trouble names file and line; what may be ignored is ignored.
. "$(dirname "$0")/lib.sh"
cp -r "$TESTDATA/check/clean" run
F=run/rank1.jsonl
CLEAN=$TESTDATA/check/clean/rank1.jsonl

# replace_line N TEXT: line N of rank1.jsonl becomes TEXT (passed through a
# file: one argument may not exceed 128 KiB).
replace_line() {
  printf '%s' "$2" >"$WORK/line"
  python3 -c '
import sys
lines = open(sys.argv[1]).read().split("\n")
lines[int(sys.argv[3]) - 1] = open(sys.argv[4]).read()
open(sys.argv[2], "w").write("\n".join(lines))
' "$CLEAN" "$F" "$1" "$WORK/line"
}

deep=$(python3 -c 'print("[" * 100000 + "]" * 100000)')
replace_line 3 "{\"x\":$deep,\"step\":0}"
run_dtrace 2 check run
trouble_is "$F:3: not valid JSON"
# A header whose config nests 100,000 deep (copying or printing it would
# recurse that deep): refused before it is parsed.
deep_objects=$(python3 -c 'print("{\"a\":" * 100000 + "1" + "}" * 100000)')
replace_line 1 "{\"dtrace\":\"fp/1\",\"world_size\":2,\"hash\":\"xxh3-64k/1\",\"config\":$deep_objects}"
run_dtrace 2 diff "$TESTDATA/check/clean" run
trouble_is "$F:1: header nested deeper than 1024 levels"

replace_line 3 '{"step":123456789012345678901234567890,"rank":1,"seq":1,"scope":"a","op":"b","io":"out","name":"x","hash":"00"}'
run_dtrace 2 check run
trouble_is "$F:3: field 'step' must be an integer"
replace_line 3 '{"step":0,"rank":1e999,"seq":1,"scope":"a","op":"b","io":"out","name":"x","hash":"00"}'
run_dtrace 2 check run
trouble_is "$F:3: field 'rank' must be an integer"
replace_line 3 '{"step":0,"rank":-1,"seq":1,"scope":"a","op":"b","io":"out","name":"x","hash":"00"}'
run_dtrace 2 check run
trouble_is "$F:3: field 'rank' out of range"
replace_line 1 '{"dtrace":"fp/1","run":"a","world_size":99999999999999999999999,"hash":"xxh3-64k/1"}'
run_dtrace 2 check run
trouble_is "$F:1: header field 'world_size' must be a positive integer"

# Huge numbers where the reader ignores the value: read past.
sed '3s/}$/,"x":1e999999,"y":-98765432109876543210987654321,"value":1e400}/' "$CLEAN" >"$F"
run_dtrace 0 diff "$TESTDATA/check/clean" run

# A header twice in one file; a file without a header.
{ head -n1 "$CLEAN"; cat "$CLEAN"; } >"$F"
run_dtrace 2 check run
trouble_is "$F:2: a second header in one file"
tail -n +2 "$CLEAN" >"$F"
run_dtrace 2 check run
trouble_is "$F:1: header without field 'dtrace'"
