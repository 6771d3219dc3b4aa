#!/usr/bin/env bash
# Inside a compiled region, inductor's generated kernel (issue 42; docs/torch.md,
# torch.compile): gpt_moe.py --compile --nondet inductor-order ends each block
# with a reduction over the whole batch in plain torch, which inductor fuses
# into a generated C++ kernel split among the threads its code is generated
# for; --inductor-threads 1 and 2 give the two runs code that adds the same
# terms in other orders (standing for inductor's split reductions with atomics
# on a GPU), while ATen's eager kernels are the same. So at kernel level the
# region's graph run eagerly (fwd/blocks.0/eager) agrees, and the generated
# kernels, recorded one by one as the compiled call runs them
# (fwd/blocks.0/inductor), show the first that differs from agreeing inputs:
# bisect names it by the name inductor's output code gives it, call 0,
# confirmed by calling that kernel alone, as each side compiled it, from its
# captured arguments. The compiled backward's generated reduction differs too:
# with the forward's kernel pinned, the culprit search names it in
# bwd/blocks.0/inductor, confirmed by calling this process's own backward
# kernel alone, and with both pinned the replays agree; over replay sessions
# and over --launches.
#
# torch 1.13 has no torch.compile: there the test checks that --compile is
# refused and skips (status 77; tools/test.sh's torch 2.x pass runs it).
. "$(dirname "$0")/torch-lib.sh"
needs_compile "--compile needs torch 2.x" "$EXAMPLE" --steps 1 --run-dir r --compile

plant=(--steps 1 --layers 1 --compile --nondet inductor-order)
ex "${plant[@]}" --inductor-threads 1 --run-dir a --checkpoint-dir ca --checkpoint-every 1
ex "${plant[@]}" --inductor-threads 2 --run-dir b --checkpoint-dir cb --checkpoint-every 1
run_dtrace 1 diff --json a b
json_is first.step 0

# What a kernel-level replay of the region records: its eager graph's ops,
# then each generated kernel its compiled call ran, by the name the output
# code gives it (in: what it reads, before it ran; out: what it wrote), then
# the region's results.
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=kernel DTRACE_OUT=kernel.jsonl ex "${plant[@]}" --inductor-threads 1 \
  --run-dir a --checkpoint-dir ca
"$PYTHON" - <<'PY' || fail "the generated kernels' records"
import glob, json, os, re
records = [r for r in map(json.loads, open("kernel.jsonl")) if "scope" in r and r.get("step") == 0]
where = lambda scope: [i for i, r in enumerate(records) if r["scope"] == scope]
eager, generated = where("fwd/blocks.0/eager"), where("fwd/blocks.0/inductor")
assert eager and generated, sorted({r["scope"] for r in records})
region_out = [i for i in where("fwd/blocks.0") if records[i]["op"] == "torch.compile" and records[i]["io"] == "out"]
assert max(eager) < min(generated) and max(generated) < min(region_out), (max(eager), generated, region_out)
code = "".join(open(f).read() for f in glob.glob(os.path.join(os.environ["TORCHINDUCTOR_CACHE_DIR"], "*", "*.py")))
for op in {records[i]["op"] for i in generated}:
    assert re.search(r"^%s = async_compile\." % re.escape(op), code, re.M), ("not in the output code", op)
    ios = {(records[i]["io"], records[i]["name"]) for i in generated if records[i]["op"] == op}
    assert ("out", "in_out_ptr0") in ios or any(io == "out" and n.startswith("out_ptr") for io, n in ios), ios
    # A buffer the kernel only writes is no input of it.
    assert not [n for io, n in ios if io == "in" and n.startswith("out_ptr")], ios
# The compiled backward's generated kernels, one by one too, in bwd/blocks.0/inductor:
# each inside one compiled backward node's torch.compile call (after its in,
# before its out), never inside the forward's call; the whole-batch reduction's
# backward among them.
backward = where("bwd/blocks.0/inductor")
assert backward and min(backward) > max(region_out), (backward, region_out)
node_in = [i for i in where("bwd/blocks.0") if records[i]["op"] == "torch.compile" and records[i]["io"] == "in"]
node_out = [i for i in where("bwd/blocks.0") if records[i]["op"] == "torch.compile" and records[i]["io"] == "out"]
for i in backward:
    assert max(j for j in node_in if j < i) > max([j for j in node_out if j < i] or [-1]), ("outside a node", i)
    assert re.search(r"^%s = async_compile\." % re.escape(records[i]["op"]), code, re.M), records[i]["op"]
assert [i for i in backward if "backward" in records[i]["op"] and "pow_sum" in records[i]["op"]], \
    sorted({records[i]["op"] for i in backward})
assert not [i for i in backward if records[i]["io"] == "in" and records[i]["name"].startswith("out_ptr")]
PY

for how in sessions launches; do
  flags=()
  [ "$how" = launches ] && flags=(--launches)
  [ "$how" = sessions ] && flags=(--keep kept)
  run_dtrace 0 bisect --trust --timeout 900 "${flags[@]}" --json a b
  json_is verdict '"named"'
  json_is layer '"fwd/blocks.0"'
  json_is culprit.scope '"fwd/blocks.0/inductor"'
  json_true 'd["culprit"]["op"].startswith("cpp_fused_") and "mean" in d["culprit"]["op"]'
  json_is culprit.occurrence 0
  json_is culprit.basis '"confirmed"'
  # The region apart from the kernel: its scope, and the part the kernel is in.
  json_is culprit.region.scope '"fwd/blocks.0"'
  json_is culprit.region.part '"inductor"'
  json_true 'd["evidence"]["distinct_outputs"] >= 2'
  json_true 'd["evidence"]["kernels"] == [d["culprit"]["op"]]'
  # The name a user finds in inductor's output code (TORCH_LOGS=output_code).
  op=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["culprit"]["op"])' "$OUT")
  grep -rqE "^$op = async_compile\." "$TORCHINDUCTOR_CACHE_DIR" || fail "$op is not a kernel of the output code"
  # The kernel pinned, the forward agrees; the search goes on: the backward's
  # own generated reduction differs too, and is named as the kernel of the
  # compiled backward it is, in bwd/blocks.0/inductor, confirmed by calling
  # this process's own backward kernel alone from its captured arguments.
  # With both pinned the replays agree.
  json_true '[c["scope"] for c in d["culprits"]] == ["fwd/blocks.0/inductor", "bwd/blocks.0/inductor"]'
  json_true 'd["culprits"][1]["op"].startswith("cpp_fused_") and "backward" in d["culprits"][1]["op"]'
  json_true 'd["culprits"][1]["layer"] == "bwd/blocks.0" and d["culprits"][1]["occurrence"] == 0'
  json_true 'd["culprits"][1]["basis"] == "confirmed" and d["culprits"][1]["evidence"]["distinct_outputs"] >= 2'
  json_true 'd["culprits"][1]["region"]["scope"] == "bwd/blocks.0" and d["culprits"][1]["region"]["part"] == "inductor"'
  json_true 'd["culprits"][1]["evidence"]["kernels"] == [d["culprits"][1]["op"]]'
  json_is search.stop '"agree"'
  bop=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["culprits"][1]["op"])' "$OUT")
  grep -rqE "^$bop = async_compile\." "$TORCHINDUCTOR_CACHE_DIR" || fail "$bop is not a kernel of the output code"
done

# The region's own confirm (DTRACE_ISOLATE=fwd/blocks.0::torch.compile), by
# hand from the kept capture: its listing names the generated kernels as they
# run, the culprit among them, by the output code's names, and nothing is
# compiled again for it (inductor's cache holds the same output code after).
code_files() { find "$TORCHINDUCTOR_CACHE_DIR" -name '*.py' | sort; }
code_files >code-before
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=kernel DTRACE_SCOPE=fwd/blocks.0 DTRACE_ISOLATE=fwd/blocks.0::torch.compile \
  DTRACE_INPUTS=kept/capture-A DTRACE_REPEAT=2 DTRACE_OUT_DIR=region-out DTRACE_CAPTURE=region-capture \
  DTRACE_OUT=region-out/replay.jsonl ex "${plant[@]}" --inductor-threads 1 --run-dir a --checkpoint-dir ca
code_files >code-after
cmp -s code-before code-after || fail "the region's confirm compiled it again: $(comm -13 code-before code-after)"
"$PYTHON" - "$op" <<'PY' || fail "the region's kernel listing"
import json, sys
listing = json.load(open("region-capture/kernels.rank0.json"))
assert sys.argv[1] in listing["kernels"], listing
assert not [k for k in listing["kernels"] if k.startswith("graph_")], listing
PY
echo ok
