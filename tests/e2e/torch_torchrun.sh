#!/usr/bin/env bash
# Two ranks over gloo under torchrun (python3 -m torch.distributed.run), the
# planted combine on rank 1 only. Debian's torch 1.13 on Python 3.11 needs
# `--redirects 9:0 --tee 9:0` (docs/torch.md: its default "0" parses to None
# there); --no_python lets the rank's command be `python script args`, as each
# rank records it. DTRACE_TORCH_LAUNCHER holds the torchrun line, so each run's
# replay command is torchrun's and bisect's replays restart both ranks through
# it: bisect --trust names the planted op on rank 1 (at step level diff sees
# both ranks differ: the gradients are averaged across them), starting torchrun
# once per side (replay sessions).
. "$(dirname "$0")/torch-lib.sh"
if ! "$PYTHON" -c 'import torch.distributed.run' 2>/dev/null; then
  skip "$PYTHON has no torch.distributed.run"
fi
TORCHRUN=$(torchrun 2)
for r in a b; do
  # shellcheck disable=SC2086 # the launcher line is words
  DTRACE_TORCH_LAUNCHER="$TORCHRUN" $TORCHRUN "$PYTHON" "$EXAMPLE" --steps 2 --nondet combine --nondet-rank 1 \
    --run-dir $r --checkpoint-dir c$r --checkpoint-every 1 >"$WORK/$r.out" 2>&1 ||
    { cat "$WORK/$r.out" >&2; fail "torchrun run $r"; }
done
[ -f a/rank0.jsonl ] && [ -f a/rank1.jsonl ] || fail "torchrun started no two ranks"
"$PYTHON" -c '
import json, sys
argv = json.loads(open("a/rank1.jsonl").readline())["replay"]["argv"]
assert argv[1:3] == ["-m", "torch.distributed.run"] and "--no_python" in argv, argv
' || fail "the replay command is not the torchrun line"
run_dtrace 1 diff --json a b
json_is first.step 0
run_dtrace 0 bisect --trust --timeout 600 --json a b
json_is verdict '"named"'
json_is culprit.rank 1
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"fwd/blocks.0.moe"'
# dtrace_torch serves replay sessions: torchrun is started once per side, both
# ranks serving every replay (issue 30); with --launches once per replay.
if [ "${E2E_REPLAYS:-}" = launches ]; then
  json_is replay_mode '"launches"'
  json_true 'len(d["launches"]) == len(d["replays"]) >= 8'
else
  json_is replay_mode '"sessions"'
  json_true 'len(d["launches"]) == 2 and [l["side"] for l in d["launches"]] == ["A", "B"]'
  json_true 'all(l["session"] and l["argv"][1:3] == ["-m", "torch.distributed.run"] for l in d["launches"])'
  json_true 'len(d["replays"]) >= 8 and all(r["via"] == "request" for r in d["replays"])'
fi
echo ok
