#!/usr/bin/env bash
# The planted custom op (--nondet combine: the MoE combine adds in a random order):
# two runs recorded at step level diverge at step 0, and bisect --trust names the
# op, dtrace_example.combine.default, in the MoE layer's module scope
# fwd/blocks.0.moe, with evidence of distinct outputs from identical inputs.
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
echo ok
