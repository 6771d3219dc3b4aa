#!/usr/bin/env bash
# `dtrace verify` and `dtrace tax` run a job of three processes through its own
# launcher (multiproc/launch.sh) the way bisect does: every rank writes its run
# to DTRACE_RUN_DIR and is compared or timed, and a rank that fails in an arm
# stops the arm at once and is named, with nothing left running or in TMPDIR.
. "$(dirname "$0")/lib.sh"
MP=$SOURCE_ROOT/tests/e2e/multiproc
job=("$MP/launch.sh" 3 python3 "$MP/worker.py" --steps 2 --out mine)

run_dtrace 0 verify --json -- "${job[@]}"
json_is certified true
json_is world_size 3
json_is compared.ranks 3
[ ! -e mine ] || fail "an arm wrote the user's --out"

run_dtrace 1 verify --json -- "${job[@]}" --planted 1
json_is certified false
json_is first.rank 1
json_is first.scope '"fwd/layer.1"'

run_dtrace 0 tax --arms 1 --json -- "${job[@]}"
# every rank's step_seconds read; the first step is warm-up, left out
json_true 'd["deterministic"]["steps"] == 1 and d["fast"]["steps"] == 1'
json_is deterministic_identical null

tmp=$WORK/tmp
mkdir -p "$tmp"
start=$SECONDS
MP_FAIL_RANK=1 TMPDIR=$tmp run_dtrace 2 verify --timeout 60 -- "${job[@]}"
err_has "arm arm1 failed (rank 1 exited with status 1): RuntimeError: planted failure on rank 1"
[ $((SECONDS - start)) -lt 30 ] || fail "the failed arm took $((SECONDS - start)) s"
[ -z "$(ls -A "$tmp")" ] || fail "left in TMPDIR: $(ls -A "$tmp")"
MP_FAIL_RANK=2 TMPDIR=$tmp run_dtrace 2 tax --arms 1 --timeout 60 -- "${job[@]}"
err_has "rank 2 exited with status 1"
[ -z "$(ls -A "$tmp")" ] || fail "left in TMPDIR: $(ls -A "$tmp")"
echo ok
