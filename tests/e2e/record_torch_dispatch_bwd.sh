#!/usr/bin/env bash
# dtrace record on an unmodified program, a cause in an activation gradient's
# backward (issue 39, proof): plain_lm.py --nondet dispatch-bwd (the MoE
# dispatch's backward adds each token's gradients in a random order; the
# forward is exact) recorded twice by `dtrace record`: the runs differ at
# step 0 in the gradients, and `bisect --trust` names the same op, scope and
# occurrence as gpt_moe.py's explicit Recorder does with the same switch
# (dtrace_example.combine.default in bwd/blocks.1.moe, found by isolating the
# layer's backward from its captured output gradients).
. "$(dirname "$0")/record-torch-lib.sh"
explicit ea --steps 2 --nondet dispatch-bwd
explicit eb --steps 2 --nondet dispatch-bwd
bisect_into explicit.json ea eb

plain a --steps 2 --nondet dispatch-bwd
plain b --steps 2 --nondet dispatch-bwd
run_dtrace 1 diff --json a b
json_is first.step 0
json_is first.op '"grads"'
bisect_into recorded.json a b
json_is layer '"bwd/blocks.1.moe"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"bwd/blocks.1.moe"'
json_true 'any(r["stage"] == "kernel" and r["env"].get("DTRACE_ISOLATE") == "bwd/blocks.1.moe"
               and r["exit"] == 0 for r in d["replays"])'
same_culprit explicit.json recorded.json
echo ok
