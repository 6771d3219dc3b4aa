#!/usr/bin/env bash
# dtrace record on an unmodified program, a cause in a forward (issue 39,
# proof): plain_lm.py --nondet combine (gpt_moe.py's model, its MoE combine a
# custom op adding in a random order, called once per block) recorded twice by
# `dtrace record`, no line of dtrace in it: the runs differ at step 0, and
# `bisect --trust` names the same op, scope and occurrence as gpt_moe.py's
# explicit Recorder does with the same switch (both bisected here, compared
# field by field): dtrace_example.combine.default in fwd/blocks.0.moe. The
# replays run the recorded command again, `dtrace record -- CMD`, which the
# run's header holds as its replay command.
. "$(dirname "$0")/record-torch-lib.sh"
explicit ea --steps 2 --nondet combine
explicit eb --steps 2 --nondet combine
bisect_into explicit.json ea eb

plain a --steps 2 --nondet combine
plain b --steps 2 --nondet combine
"$PYTHON" - "${real_dtrace:-$DTRACE}" "$PYTHON" "$PLAIN" <<'PY' || fail "the replay command is not the recorded command"
import json, os, sys
dtrace, python, plain = sys.argv[1:4]
replay = json.loads(open("a/rank0.jsonl").readline())["replay"]
want = [os.path.realpath(dtrace), "record", "--", python, plain, "--steps", "2", "--nondet", "combine"]
assert replay["argv"] == want, replay["argv"]
assert os.path.samefile(replay["cwd"], "."), replay["cwd"]
PY
run_dtrace 1 diff --json a b
json_is first.step 0
bisect_into recorded.json a b
json_is verdict '"named"'
json_is culprit.op '"dtrace_example.combine.default"'
json_is culprit.scope '"fwd/blocks.0.moe"'
json_is culprit.basis '"confirmed"'
same_culprit explicit.json recorded.json
# Every replay ran through dtrace record, and every one ended well.
json_true 'd["launches"] and all(l["argv"][1:3] == ["record", "--"] for l in d["launches"])'
json_true 'all(r["exit"] == 0 for r in d["replays"])'
echo ok
