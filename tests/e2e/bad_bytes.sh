#!/bin/bash
# Bytes no recorder writes: a NUL byte is trouble naming file and line; CRLF
# line ends and a byte-order mark are read (the mark with a note); a mark on a
# later line is trouble naming its line.
. "$(dirname "$0")/lib.sh"
cp -r "$TESTDATA/check/clean" run
F=run/rank1.jsonl

# NUL inside a record (line 3).
python3 - "$F" <<'PY'
import sys; p = sys.argv[1]; lines = open(p, "rb").read().split(b"\n")
lines[2] = lines[2][:10] + b"\0" + lines[2][11:]
open(p, "wb").write(b"\n".join(lines))
PY
run_dtrace 2 check run
trouble_is "$F:3: not valid JSON"
run_dtrace 2 diff "$TESTDATA/check/clean" run
trouble_is "$F:3: not valid JSON"

# A line of NUL bytes alone (line 2).
cp "$TESTDATA/check/clean/rank1.jsonl" "$F"
sed -i '1a\\x00\x00\x00' "$F"
run_dtrace 2 show run
trouble_is "$F:2: not valid JSON"

# CRLF line ends everywhere, and a byte-order mark: read as usual.
sed 's/$/\r/' "$TESTDATA/check/clean/rank1.jsonl" >"$F"
run_dtrace 0 diff "$TESTDATA/check/clean" run
printf '\xef\xbb\xbf' | cat - "$TESTDATA/check/clean/rank1.jsonl" >"$F"
run_dtrace 0 check run
out_has "$F:1: byte-order mark ignored"

# A byte-order mark on line 2 is not JSON.
{ head -n1 "$TESTDATA/check/clean/rank1.jsonl"; printf '\xef\xbb\xbf'; tail -n +2 "$TESTDATA/check/clean/rank1.jsonl"; } >"$F"
run_dtrace 2 check run
trouble_is "$F:2: not valid JSON"
