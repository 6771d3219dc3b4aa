#!/bin/bash
# A diff of many rank files costs no more system calls than reading them
# (issue 41): each file is opened once (the header check, the byte stage and
# the reader share its descriptor; a run without chains is not opened again by
# the search), and read buffers are reused, not mapped and unmapped per file.
# Counted with strace, so the test is deterministic and never timed. The
# files declare no rank (make_run --undeclared), so the streaming path reads
# them all, as tools/bench/many_files.sh measures.
. "$(dirname "$0")/lib.sh"
: "${MAKE_RUN:?MAKE_RUN must name tools/bench/make_run}"
command -v strace >/dev/null || skip "strace is not installed"
if ! strace -f -o /dev/null true 2>/dev/null; then
  echo "SKIP: strace cannot trace here (ptrace not permitted)"
  exit 77
fi

RANKS=512
"$MAKE_RUN" "$WORK/a" --ranks $RANKS --steps 3 --layers 1 --undeclared >/dev/null || fail "make_run a"
"$MAKE_RUN" "$WORK/b" --ranks $RANKS --steps 3 --layers 1 --undeclared --diverge 2:300:4 >/dev/null ||
  fail "make_run b"

# diff_traced A B: dtrace diff --json of runs A and B under strace, the
# planted divergence found; every rank file of both runs opened, each exactly
# once but a run's first (rank0.jsonl, first in file order): the search looks
# there (two opens) before it would open them all.
diff_traced() {
  local status=0
  # LeakSanitizer cannot run under ptrace (the sanitizer pass of tools/test.sh
  # turns it on): off for the traced diff, the last option given winning.
  ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0" \
    strace -f -qq -e trace=openat,open,mmap,munmap -o trace.txt \
    "$DTRACE" diff --json "$WORK/$1" "$WORK/$2" >"$OUT" 2>"$ERR" || status=$?
  [ "$status" = 1 ] || fail "diff exit $status, expected 1"
  json_is first.step 2
  json_is first.rank 300
  json_is first.seq 4
  grep -oE "\"$WORK/($1|$2)/rank[0-9]+\.jsonl\"" trace.txt | sort | uniq -c >opens.txt
  files=$(wc -l <opens.txt)
  [ "$files" = $((2 * RANKS)) ] || fail "$files rank files opened, expected $((2 * RANKS))"
  twice=$(grep -v '/rank0\.jsonl"' opens.txt | awk '$1 != 1' | head -3)
  [ -z "$twice" ] || fail "rank files opened more than once (count, file): $twice"
  first=$(grep '/rank0\.jsonl"' opens.txt | awk '$1 > 3' | head -2)
  [ -z "$first" ] || fail "a run's first file opened more than three times: $first"
}

diff_traced a b

# No mapping per file: threads' stacks and arenas and the program's own
# libraries are a fixed number (about 140), a buffer mapped per file would be
# one per file or more (1,024 and up here).
# Not under AddressSanitizer (tools/test.sh's sanitizer pass), whose own
# allocator maps memory as it likes.
maps=$(grep -c ' mmap(' trace.txt)
if ldd "$DTRACE" 2>/dev/null | grep -q libasan; then
  echo "ok: $files rank files opened once each (mmap calls not counted: AddressSanitizer's allocator)"
else
  [ "$maps" -lt $RANKS ] || fail "$maps mmap calls for $((2 * RANKS)) rank files: a buffer mapped per file?"
  echo "ok: $files rank files opened once each, $maps mmap calls"
fi

# With chained end records but no rank declaration (an older recorder's): the
# search does not apply either, says why, and still opens no file twice.
"$MAKE_RUN" "$WORK/ca" --ranks $RANKS --steps 3 --layers 1 --undeclared --chain >/dev/null || fail "make_run ca"
"$MAKE_RUN" "$WORK/cb" --ranks $RANKS --steps 3 --layers 1 --undeclared --chain --diverge 2:300:4 >/dev/null ||
  fail "make_run cb"
diff_traced ca cb
json_true 'any(n.startswith("chained digests not searched") and "ca/rank0.jsonl: its header does not declare" in n for n in d["notes"])'
echo "ok: chained runs without rank declarations, $files rank files opened once each"
