#!/bin/bash
# A 100 MB line is trouble naming its file and line, and memory stays bounded:
# the reader refuses a line past 16 MiB instead of holding it.
. "$(dirname "$0")/lib.sh"
cp -r "$TESTDATA/check/clean" run
F=run/rank1.jsonl
{
  head -n 2 "$TESTDATA/check/clean/rank1.jsonl"
  python3 -c 'import sys; sys.stdout.write("{\"pad\":\"" + "x" * 100_000_000 + "\"}\n")'
  tail -n +3 "$TESTDATA/check/clean/rank1.jsonl"
} >"$F"
[ "$(stat -c %s "$F")" -gt 100000000 ] || fail "the long line was not written"

# Sanitizers (tools/test.sh's second build) add shadow memory and a quarantine:
# freed memory waits there (256 MiB by default) before reuse, and diff, whose
# byte stage gives way to a second full read after an error, frees and
# allocates the refused line's 16 MiB twice. A small quarantine keeps the
# bound about dtrace's memory, not ASan's.
bound=150000
if ldd "$DTRACE" | grep libasan >/dev/null; then
  bound=400000
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
fi

/usr/bin/time -f %M -o "$WORK/rss" "$DTRACE" check run >"$OUT" 2>"$ERR" && fail "check passed"
trouble_is "$F:3: line longer than 16 MiB"
rss=$(tail -n1 "$WORK/rss")
[ "$rss" -lt "$bound" ] || fail "peak RSS $rss KiB reading a 100 MB line (bound: $bound KiB)"

/usr/bin/time -f %M -o "$WORK/rss" "$DTRACE" diff "$TESTDATA/check/clean" run >"$OUT" 2>"$ERR" && fail "diff passed"
trouble_is "$F:3: line longer than 16 MiB"
rss=$(tail -n1 "$WORK/rss")
[ "$rss" -lt "$bound" ] || fail "peak RSS $rss KiB diffing a 100 MB line (bound: $bound KiB)"
