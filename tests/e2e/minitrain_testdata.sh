#!/usr/bin/env bash
# The shipped minitrain runs are what tools/make-testdata.sh makes with today's
# minitrain, and read as the script says:
# same-* identical, splitk-* diverge at the layer holding the planted op,
# fused-ce-* in the loss metric only.
. "$(dirname "$0")/minitrain-lib.sh"
: "${TESTDATA:?}"

# The shipped runs are what today's minitrain makes: tools/make-testdata.sh
# run afresh gives the same files, line for line, but for the header's replay
# (this machine's paths) and the timing records (wall-clock times).
"$TESTDATA/../tools/make-testdata.sh" - "$WORK/fresh" >/dev/null
comparable() { jq -c 'del(.replay) | select(.io != "timing")' "$1"; }
[ "$(cd "$TESTDATA/minitrain" && find . -type f | sort)" = "$(cd "$WORK/fresh" && find . -type f | sort)" ] ||
  fail "testdata/minitrain holds other files than tools/make-testdata.sh makes"
for f in "$WORK"/fresh/*/*.jsonl; do
  shipped=$TESTDATA/minitrain/${f#"$WORK"/fresh/}
  diff <(comparable "$shipped") <(comparable "$f") >"$WORK/drift.txt" ||
    fail "$shipped is not what today's minitrain makes (rerun tools/make-testdata.sh):
$(head -4 "$WORK/drift.txt")"
done
for run in "$TESTDATA"/minitrain/*/; do expect_status 0 "$DTRACE" check "$run"; done
expect_status 0 "$DTRACE" diff "$TESTDATA/minitrain/same-a" "$TESTDATA/minitrain/same-b"
expect_status 1 "$DTRACE" diff --json "$TESTDATA/minitrain/splitk-a" "$TESTDATA/minitrain/splitk-b"
[ "$(jq -r '.first.scope + " " + .first.role' out.txt)" = "fwd/layer.0/mlp origin" ] || fail "splitk: $(jq -c .first out.txt)"
expect_status 1 "$DTRACE" diff --json "$TESTDATA/minitrain/fused-ce-a" "$TESTDATA/minitrain/fused-ce-b"
[ "$(jq -r '.first.io + " " + .first.name' out.txt)" = "metric loss" ] || fail "fused-ce: $(jq -c .first out.txt)"
echo ok
