#!/usr/bin/env bash
# The planted custom op (--nondet combine: the MoE combine adds in a random order):
# two runs recorded at step level diverge at step 0, and bisect --trust names the
# op, dtrace_example.combine.default, in the MoE layer's module scope
# fwd/blocks.0.moe, with evidence of distinct outputs from identical inputs and
# the ATen ops it ran (torch.profiler in the confirm replay).
. "$(dirname "$0")/torch-lib.sh"
ex --steps 2 --nondet combine --run-dir a --checkpoint-dir ca --checkpoint-every 1
ex --steps 2 --nondet combine --run-dir b --checkpoint-dir cb --checkpoint-every 1
run_dtrace 1 diff --json a b
json_is first.step 0
run_dtrace 0 bisect --trust --timeout 600 --json a b
json_is verdict '"named"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"fwd/blocks.0.moe"'
json_is culprit.role '"origin"'
json_true 'd["evidence"]["distinct_outputs"] >= 2'
# What the op ran beneath it in the confirm replay (torch.profiler; on the CPU
# its ATen ops: the custom op accumulates with index_add_).
json_true '"aten::index_add_" in d["evidence"]["kernels"]'
json_is evidence.kernels_device '"cpu"'
json_is evidence.kernels_source '"torch.profiler"'
run_dtrace 0 bisect --trust --timeout 600 a b
grep -q '^  kernels:  .*aten::index_add_.* (cpu, torch.profiler)$' "$OUT" || fail "the text report lists no kernels"
echo ok
