#!/usr/bin/env bash
# dtrace record on an unmodified program, a cause that changes only a
# parameter's gradient (issue 39, proof): plain_lm.py --nondet embed-bwd (the
# token embedding's backward adds the rows of its weight gradient in a random
# order; its forward and the gradient it passes on are exact) recorded twice by
# `dtrace record`: the runs differ at step 0 in embed.weight's gradient only,
# and `bisect --trust` names the same op, scope and occurrence as gpt_moe.py's
# explicit Recorder does with the same switch (dtrace_example.combine.default
# in bwd/embed, confirmed alone).
. "$(dirname "$0")/record-torch-lib.sh"
explicit ea --steps 2 --nondet embed-bwd
explicit eb --steps 2 --nondet embed-bwd
bisect_into explicit.json ea eb

plain a --steps 2 --nondet embed-bwd
plain b --steps 2 --nondet embed-bwd
run_dtrace 1 diff --json a b
json_is first.step 0
json_is first.op '"grads"'
json_is first.name '"embed.weight"'
bisect_into recorded.json a b
json_is layer '"bwd/embed"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"bwd/embed"'
json_is culprit.basis '"confirmed"'
same_culprit explicit.json recorded.json
echo ok
