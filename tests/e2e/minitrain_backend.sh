#!/usr/bin/env bash
# --backend: cpu is the default and changes no bit; cuda in a build without
# CUDA says so (exit 2); in a CUDA build on a machine without a GPU it exits 2
# with the CUDA error (file, line, call); with a GPU it trains (tools/gpu-check.sh
# checks it there). Nothing is written on failure.
. "$(dirname "$0")/minitrain-lib.sh"
tiny=(--d-model 16 --layers 1 --heads 2 --seq 8 --batch 2 --steps 2)

"$MINITRAIN" "${tiny[@]}" --out a >/dev/null || fail "the default backend failed"
"$MINITRAIN" "${tiny[@]}" --backend cpu --out b >/dev/null || fail "--backend cpu failed"
"$DTRACE" diff a b >/dev/null || fail "--backend cpu differs from the default"
grep -q '"backend"' a/rank0.jsonl && fail "a cpu run's header names a backend"

expect_status 2 "$MINITRAIN" "${tiny[@]}" --backend tpu --out x
MINITRAIN_RANK=5 MINITRAIN_BOOTSTRAP=. expect_status 2 "$MINITRAIN" "${tiny[@]}" --backend cuda --ranks 2 --out x
grep -q "not a rank" err.txt || fail "no message for a MINITRAIN_RANK outside --ranks"
MINITRAIN_RANK=0 MINITRAIN_BOOTSTRAP=. expect_status 2 "$MINITRAIN" "${tiny[@]}" --out x
grep -q "cuda processes only" err.txt || fail "no message for MINITRAIN_RANK on the cpu backend"
printf 'x\n' >full.jsonl
DTRACE_REPLAY_STEP=0 DTRACE_OUT=full.jsonl expect_status 2 "$MINITRAIN" "${tiny[@]}" --backend cuda --ranks 2
[ "$(cat full.jsonl)" = x ] || fail "a multi-process replay overwrote a DTRACE_OUT with content"

# Without a usable CUDA the error is the same for one process and for the
# launcher's R processes (which leave no bootstrap directory behind).
if [ "${HAVE_CUDA:-0}" != 1 ]; then
  for ranks in 1 2; do
    TMPDIR=$WORK expect_status 2 "$MINITRAIN" "${tiny[@]}" --backend cuda --ranks $ranks --out x
    grep -q "minitrain was built without CUDA" err.txt || fail "no message for a build without CUDA"
  done
elif ! grep -q GPU <<<"$(nvidia-smi -L 2>/dev/null || true)"; then
  for ranks in 1 2; do
    TMPDIR=$WORK expect_status 2 "$MINITRAIN" "${tiny[@]}" --backend cuda --ranks $ranks --out x
    grep -q "minitrain: error: --backend cuda: .*cuda.*failed" err.txt ||
      fail "no CUDA error for a machine without a GPU: $(cat err.txt)"
  done
  # A replay of a multi-process job (dtrace-replay/1.1: one directory, a file
  # per rank) fails the same way, writing no records.
  mkdir -p "$WORK/replay"
  DTRACE_REPLAY_STEP=0 DTRACE_OUT_DIR=$WORK/replay DTRACE_OUT=$WORK/replay/replay.jsonl TMPDIR=$WORK \
    expect_status 2 "$MINITRAIN" "${tiny[@]}" --backend cuda --ranks 2
  # Each rank's stderr goes to the replay's rank<r>.stderr (dtrace-fp(5)).
  cat "$WORK"/replay/rank*.stderr >>err.txt 2>/dev/null || true
  grep -q "cuda.*failed" err.txt || fail "no CUDA error for a multi-process replay: $(cat err.txt)"
  for f in "$WORK"/replay/*.jsonl; do
    [ ! -s "$f" ] || fail "a failed multi-process replay wrote records: $f"
  done
  # (a glob, not `ls | grep -q`: under pipefail grep's early exit can fail ls)
  ! compgen -G "$WORK/*minitrain-nccl*" >/dev/null || fail "the launcher left its bootstrap directory"
else
  "$MINITRAIN" "${tiny[@]}" --backend cuda --out gpu >/dev/null || fail "--backend cuda failed on a GPU"
  grep -q '"backend":"cuda"' gpu/rank0.jsonl || fail "the cuda run's config does not say so"
fi
[ ! -e x ] || fail "a failed start left a run directory"
echo ok
