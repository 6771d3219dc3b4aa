#!/usr/bin/env bash
# verify's trouble is exit 2 with one line saying which arm and why: a command
# that fails, one that writes no run to DTRACE_RUN_DIR, an existing --keep.
. "$(dirname "$0")/minitrain-lib.sh"
expect_status 2 "$DTRACE" verify -- "$MINITRAIN" --steps 3 --layers 0 --out mine
grep -q "arm arm1 failed (exit 2): minitrain: error: --layers must be at least 1" err.txt || fail "$(cat err.txt)"
expect_status 2 "$DTRACE" verify -- true
grep -q "arm arm1 wrote no log in .*DTRACE_RUN_DIR" err.txt || fail "$(cat err.txt)"
mkdir kept
expect_status 2 "$DTRACE" verify --keep kept -- "$MINITRAIN" --steps 3 --out mine
grep -q "kept: exists" err.txt || fail "$(cat err.txt)"
expect_status 2 "$DTRACE" verify --arms 1 -- "$MINITRAIN" --steps 3 --out mine
grep -qx "dtrace: error: --arms: Value 1 not in range 2 to 100 (see dtrace --help)" err.txt || fail "$(cat err.txt)"
[ ! -e mine ] || fail "a refused verify ran the workload"
echo ok
