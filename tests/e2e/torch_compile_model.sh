#!/usr/bin/env bash
# The whole model compiled (issue 42; docs/torch.md, torch.compile): gpt_moe.py
# --compile-model hands the recorder torch.compile(model), one region named
# after the model's class, fwd/GPT (never torch's attribute _orig_mod). With
# --nondet combine, the custom op of random order runs inside it, called by
# inductor's generated code; at kernel level the region's graph also runs
# eagerly in fwd/GPT/eager, so bisect names that op there (call 0, as many
# blocks as calls), confirmed alone from its captured inputs, over launches
# (--launches) as over sessions. Identical compiled runs diff identical.
# With --nondet inductor-order (tests/e2e/torch_compile_inductor.sh) the eager
# graph agrees and the generated kernel is named, in fwd/GPT/inductor.
#
# torch 1.13 has no torch.compile: there the test checks that --compile-model
# is refused and skips (status 77; tools/test.sh's torch 2.x pass runs it).
. "$(dirname "$0")/torch-lib.sh"
needs_compile "--compile needs torch 2.x" "$EXAMPLE" --steps 1 --run-dir r --compile-model

# Identical compiled runs: nothing to name.
ex --steps 1 --layers 1 --compile-model --run-dir i1 --checkpoint-dir ci1 --checkpoint-every 1
ex --steps 1 --layers 1 --compile-model --run-dir i2 --checkpoint-dir ci2 --checkpoint-every 1
run_dtrace 0 diff --json i1 i2
json_is verdict '"identical"'

ex --steps 1 --layers 1 --compile-model --nondet combine --run-dir a --checkpoint-dir ca --checkpoint-every 1
ex --steps 1 --layers 1 --compile-model --nondet combine --run-dir b --checkpoint-dir cb --checkpoint-every 1
run_dtrace 1 diff --json a b
json_is first.step 0
for how in sessions launches; do
  flags=()
  [ "$how" = launches ] && flags=(--launches)
  run_dtrace 0 bisect --trust --timeout 900 "${flags[@]}" --json a b
  json_is verdict '"named"'
  json_is layer '"fwd/GPT"'
  json_is culprit.scope '"fwd/GPT/eager"'
  json_is culprit.op '"dtrace_example.combine.default"'
  json_is culprit.occurrence 0
  json_is culprit.basis '"confirmed"'
  json_is culprit.region.scope '"fwd/GPT"'
  json_is culprit.region.part '"eager"'
  json_true 'd["evidence"]["distinct_outputs"] >= 2'
  json_true 'len(d["culprits"]) == 1'
done

plant=(--steps 1 --layers 1 --compile-model --nondet inductor-order)
ex "${plant[@]}" --inductor-threads 1 --run-dir g1 --checkpoint-dir cg1 --checkpoint-every 1
ex "${plant[@]}" --inductor-threads 2 --run-dir g2 --checkpoint-dir cg2 --checkpoint-every 1
run_dtrace 0 bisect --trust --timeout 900 --json g1 g2
json_is verdict '"named"'
json_is layer '"fwd/GPT"'
json_is culprit.scope '"fwd/GPT/inductor"'
json_true 'd["culprit"]["op"].startswith("cpp_fused_") and "mean" in d["culprit"]["op"]'
json_is culprit.occurrence 0
json_is culprit.basis '"confirmed"'
json_is culprit.region.scope '"fwd/GPT"'
json_is culprit.region.part '"inductor"'
echo ok
