#!/bin/bash
# `dtrace hash` prints the xxh3-64k/1 digests that the stock xxHash library
# gives outside dtrace (tools/xxh3-64k-reference.py, pinned below, the same
# answers tests/fingerprint_test.cpp pins for the library), for files whose
# sizes straddle the 64 KiB chunk boundaries and the threading threshold, on
# one thread, on several, on all cores, and read from standard input ('-').
. "$(dirname "$0")/lib.sh"
REFERENCE=$SOURCE_ROOT/tools/xxh3-64k-reference.py

known="0 c77b3abb6f87acd9
1 9e8d84aee6221671
3 491c885b21c532dc
65535 46e693dcb4fda3d3
65536 bf958b326484a396
65537 b65db3c41782c50c
131072 9f6c70df784fe038
131073 aeb8bfaf9cb9032a
196625 8b1795eaa01d3149
9437201 034804b846cf969c"

while read -r size digest; do
  python3 "$REFERENCE" --write-pattern "$size" "p$size"
  [ "$(stat -c %s "p$size")" = "$size" ] || fail "pattern file p$size has the wrong size"
  for threads in "" "--threads 1" "--threads 3"; do
    # shellcheck disable=SC2086  # $threads is zero or two words
    run_dtrace 0 hash $threads "p$size"
    [ "$(cat "$OUT")" = "$digest  p$size" ] || fail "hash $threads p$size: expected $digest"
  done
  got=$("$DTRACE" hash - <"p$size") || fail "hash - <p$size: exit $?"
  [ "$got" = "$digest  -" ] || fail "hash - <p$size printed '$got', expected '$digest  -'"
done <<<"$known"

# Several files at once: one line each, in the order given, '-' among them.
run_dtrace 0 hash --threads 2 p1 - p65537 <p3
[ "$(cat "$OUT")" = "9e8d84aee6221671  p1
491c885b21c532dc  -
b65db3c41782c50c  p65537" ] || fail "hash of several files"

# Standard input from a pipe, not a file (no size known in advance).
got=$(cat p131073 | "$DTRACE" hash -) || fail "hash - from a pipe: exit $?"
[ "$got" = "aeb8bfaf9cb9032a  -" ] || fail "hash - from a pipe printed '$got'"

# A file the pinned list does not cover: dtrace and the reference agree.
head -c 300001 /dev/urandom >random
[ "$("$DTRACE" hash random)" = "$(python3 "$REFERENCE" random)" ] ||
  fail "dtrace hash and the reference disagree on random bytes"
echo ok
