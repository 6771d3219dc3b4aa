#!/usr/bin/env bash
# The shipped minitrain runs (tools/make-testdata.sh) read as the script says:
# same-* identical, splitk-* diverge at the layer holding the planted op,
# fused-ce-* in the loss metric only.
. "$(dirname "$0")/minitrain-lib.sh"
: "${TESTDATA:?}"
for run in "$TESTDATA"/minitrain/*/; do expect_status 0 "$DTRACE" check "$run"; done
expect_status 0 "$DTRACE" diff "$TESTDATA/minitrain/same-a" "$TESTDATA/minitrain/same-b"
expect_status 1 "$DTRACE" diff --json "$TESTDATA/minitrain/splitk-a" "$TESTDATA/minitrain/splitk-b"
[ "$(jq -r '.first.scope + " " + .first.role' out.txt)" = "fwd/layer.0/mlp origin" ] || fail "splitk: $(jq -c .first out.txt)"
expect_status 1 "$DTRACE" diff --json "$TESTDATA/minitrain/fused-ce-a" "$TESTDATA/minitrain/fused-ce-b"
[ "$(jq -r '.first.io + " " + .first.name' out.txt)" = "metric loss" ] || fail "fused-ce: $(jq -c .first out.txt)"
echo ok
