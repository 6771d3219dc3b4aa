#!/usr/bin/env bash
# dtrace record on an unmodified program with a compiled block (issue 39,
# proof; torch 2.x): plain_lm.py --compile-block wraps blocks[0] in
# torch.compile, and --nondet combine plants the unordered combine inside that
# compiled region. Recorded twice by `dtrace record`, the runs differ at step 0
# and bisect --trust names the op inside the region as the explicit recorder
# does (tests/e2e/torch_compile.sh): dtrace_example.combine.default in the
# region's graph run eagerly, fwd/blocks.0/eager, confirmed.
#
# torch 1.13 has no torch.compile: there the test checks that --compile-block
# is refused, saying so, and skips (status 77, under CI too, as
# e2e/torch_compile does: tools/test.sh's torch 2.x pass runs it).
. "$(dirname "$0")/record-torch-lib.sh"
needs_compile "--compile-block needs torch 2.x" "$PLAIN" --steps 1 --compile-block

plain a --steps 1 --layers 1 --compile-block --nondet combine
plain b --steps 1 --layers 1 --compile-block --nondet combine
run_dtrace 1 diff --json a b
json_is first.step 0
run_dtrace 0 bisect --trust --timeout 900 --json a b
json_is verdict '"named"'
json_is layer '"fwd/blocks.0"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"fwd/blocks.0/eager"'
json_is culprit.occurrence 0
json_is culprit.basis '"confirmed"'
echo ok
