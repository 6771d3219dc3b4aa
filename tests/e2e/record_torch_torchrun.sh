#!/usr/bin/env bash
# dtrace record on an unmodified program under torchrun (issue 39, proof):
# `dtrace record --out a -- torchrun ... python plain_lm.py ...` with 2 ranks
# over gloo (gradients all_reduce'd by the program), the combine planted on
# rank 1 only. Every process of the command that imports torch is watched: the
# launcher steps no optimizer and records nothing, each rank writes its own
# rank<r>.jsonl, and the run's replay command is the whole recorded command
# (dtrace record -- torchrun ...), no DTRACE_TORCH_LAUNCHER: bisect's replays
# restart both ranks through torchrun. bisect --trust names rank 1 and the op.
# Then the same with DistributedDataParallel (plain_lm.py --ddp).
. "$(dirname "$0")/record-torch-lib.sh"
if ! "$PYTHON" -c 'import torch.distributed.run' 2>/dev/null; then
  skip "$PYTHON has no torch.distributed.run"
fi
read -r -a TORCHRUN <<<"$(torchrun 2)"

# names_rank1 SCOPE: runs a and b differ from step 0, and bisect names the
# combine op on rank 1 in SCOPE.
names_rank1() {
  run_dtrace 1 diff --json a b
  json_is first.step 0
  bisect_into recorded.json a b
  json_is verdict '"named"'
  json_is culprit.rank 1
  json_is culprit.op '"dtrace_example.combine.default"'
  json_is culprit.scope "\"$1\""
}
for r in a b; do
  plain_cmd=("${TORCHRUN[@]}" "$PYTHON" "$PLAIN" --steps 2 --nondet combine --nondet-rank 1)
  record "$r" "${plain_cmd[@]}"
done
[ "$(cd a && ls rank*.jsonl)" = "$(printf 'rank0.jsonl\nrank1.jsonl')" ] ||
  fail "the ranks' logs: $(ls a)"
"$PYTHON" - "${real_dtrace:-$DTRACE}" <<'PY' || fail "the ranks' headers"
import json, os, sys
for r in (0, 1):
    header = json.loads(open(f"a/rank{r}.jsonl").readline())
    assert header["world_size"] == 2, header
    argv = header["replay"]["argv"]
    assert argv[:3] == [os.path.realpath(sys.argv[1]), "record", "--"], argv
    assert argv[4:6] == ["-m", "torch.distributed.run"] and "--no_python" in argv, argv
    assert argv[-6:] == ["--steps", "2", "--nondet", "combine", "--nondet-rank", "1"], argv
PY
run_dtrace 0 show --json a
json_is ranks.0.step_count 2
json_is ranks.1.step_count 2
names_rank1 fwd/blocks.0.moe
json_true 'd["launches"] and all(l["argv"][1:3] == ["record", "--"] and "torch.distributed.run" in l["argv"]
                                 for l in d["launches"])'

# The same job with DistributedDataParallel averaging the gradients (the
# program's model is the DDP wrapper): the recorder finds the replica group
# itself, as dtrace_torch's does for a DDP over the whole world, so `dtrace
# replicas` needs no --groups (and finds them agreeing), and bisect names
# rank 1 and the op in the DDP model's scopes (module.<name>, as the explicit
# Recorder names them).
mkdir ddp && cd ddp
for r in a b; do
  record "$r" "${TORCHRUN[@]}" "$PYTHON" "$PLAIN" --steps 2 --ddp --nondet combine --nondet-rank 1
done
"$PYTHON" -c 'import json; h = json.loads(open("a/rank1.jsonl").readline()); assert h["replicas"]["groups"] == [[0, 1]], h' ||
  fail "the DDP run's header names no replica group: $(head -c 600 a/rank1.jsonl)"
# DDP averages the gradients inside backward: every replica steps with the
# same ones, whatever rank 1's forward computed, so the replicas agree.
run_dtrace 0 replicas a
names_rank1 fwd/module.blocks.0.moe
echo ok
