#!/usr/bin/env bash
# Two runs with the same seed give identical logs at step, layer and kernel
# level, with 1 and with 4 ranks; dtrace diff agrees (exit 0).
. "$(dirname "$0")/minitrain-lib.sh"
for ranks in 1 4; do
  for level in step layer kernel; do
    mt --steps 3 --ranks "$ranks" --level "$level" --out "a-$ranks-$level"
    mt --steps 3 --ranks "$ranks" --level "$level" --out "b-$ranks-$level"
    for ((r = 0; r < ranks; r++)); do
      ra=$(records "a-$ranks-$level/rank$r.jsonl") || fail "ranks=$ranks level=$level: run a, rank $r"
      rb=$(records "b-$ranks-$level/rank$r.jsonl") || fail "ranks=$ranks level=$level: run b, rank $r"
      [ "$ra" = "$rb" ] || fail "ranks=$ranks level=$level: rank $r logs differ"
    done
    expect_status 0 "$DTRACE" diff "a-$ranks-$level" "b-$ranks-$level"
    expect_status 0 "$DTRACE" check "a-$ranks-$level"
  done
done
# Each run is certified by dtrace check (above). Each rank wrote its own file, and the kernel level holds kernels of every kind of scope.
[ "$(ls a-4-kernel/*.jsonl | wc -l)" -eq 4 ] || fail "4 ranks should write 4 files"
for scope in fwd/embed fwd/layer.1/attn fwd/layer.0/mlp fwd/head bwd/head bwd/layer.0/mlp bwd/embed comm/grad_allreduce opt; do
  grep -q "\"scope\":\"$scope\"" a-4-kernel/rank2.jsonl || fail "no records in scope $scope"
done
echo ok
