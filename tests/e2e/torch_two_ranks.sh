#!/usr/bin/env bash
# Two ranks, data parallel over gloo, the planted combine on rank 1 only, started
# as torchrun starts them (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT per process:
# Debian's torchrun 1.13 fails on Python 3.11 before starting any). Recorded at
# layer level: diff names rank 1 the origin, in fwd/blocks.0.moe, and rank 0 a
# receiver through the gradients' all_reduce (comm/all_reduce).
. "$(dirname "$0")/torch-lib.sh"
launch() {
  local dir=$1 port=$(free_port) pids=() k
  for k in 0 1; do
    RANK=$k LOCAL_RANK=$k WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$PYTHON" "$EXAMPLE" --steps 1 --level layer --nondet combine --nondet-rank 1 --run-dir "$dir" \
      >/dev/null 2>"$WORK/rank$k.err" &
    pids+=($!)
  done
  for k in 0 1; do wait "${pids[$k]}" || { cat "$WORK/rank$k.err" >&2; fail "rank $k of $dir"; }; done
}
launch a
launch b
grep -q '"scope":"comm/all_reduce"' a/rank0.jsonl || fail "no comm/all_reduce record"
run_dtrace 1 diff --json a b
json_is first.rank 1
json_is first.role '"origin"'
json_is first.scope '"fwd/blocks.0.moe"'
json_true 'any(r["rank"] == 0 and r["role"] == "receiver" and r["scope"] == "comm/all_reduce" for r in d["ranks"])'
echo ok
