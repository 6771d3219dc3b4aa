#!/usr/bin/env bash
# The dtrace package's recorder on a program that is not PyTorch: the NumPy
# example examples/numpy/numpytrain.py (docs/python.md), as a user runs it.
# Two runs certify and are identical; two runs with the planted reordered
# reduction diverge at its layer, and `dtrace bisect --trust` names the planted
# kernel with the confirm stage's evidence (two plants: both, in step order), at one process and at three
# processes started by a plain launcher (examples/numpy/launch.py, named in
# DTRACE_PYTHON_LAUNCHER) with the plant on rank 1 only, and at a later step
# diverged-earlier on rank 1 whichever rank is asked for; a replay of one step
# restores its checkpoint and records what the run recorded; `dtrace verify`
# certifies the workload's resume. In suite 'launches' too (every bisect with
# --launches, replays-lib.sh).
. "$(dirname "$0")/python-lib.sh"
need_python_module numpy "tools/setup-deps.sh installs Debian's python3-numpy"
EXAMPLE="$SOURCE_ROOT/examples/numpy/numpytrain.py"
LAUNCH="$PYTHON $SOURCE_ROOT/examples/numpy/launch.py 3"

# nt ARGS...: the example, quiet on success.
nt() { "$PYTHON" "$EXAMPLE" "$@" >/dev/null 2>"$WORK/example.err" || { cat "$WORK/example.err" >&2; fail "numpytrain.py $*"; }; }

# bisected DIR RANK: the last bisect named the planted gemm of fwd/layer.1 at
# step 0 on RANK, confirmed alone, every replay exiting 0, the way the replays
# ran as asked (replay sessions, one launch per side, unless E2E_REPLAYS=launches).
bisected() {
  json_is verdict '"named"'
  json_is culprit.op '"gemm"'
  json_is culprit.scope '"fwd/layer.1"'
  json_is culprit.role '"origin"'
  json_is culprit.step 0
  json_is culprit.rank "$1"
  json_true 'd["evidence"]["distinct_outputs"] >= 2'
  json_true '"reduction order" in d["evidence"]["reading"]'
  json_true 'all(r["exit"] == 0 for r in d["replays"])'
  if [ "${E2E_REPLAYS:-}" = launches ]; then
    json_is replay_mode '"launches"'
  else
    json_is replay_mode '"sessions"'
    json_true 'len(d["launches"]) == 2 and all(l["session"] for l in d["launches"])'
  fi
}

# Deterministic: two runs are one trajectory, bit for bit.
nt --run-dir a --checkpoint-dir ca --steps 3 --level layer
nt --run-dir b --checkpoint-dir cb --steps 3 --level layer
run_dtrace 0 check a
run_dtrace 0 diff --json a b
json_is verdict '"identical"'
run_dtrace 0 diff a b
out_has "(the other steps known equal by their chains)"
[ -f ca/step-0.pkl ] && [ -f ca/step-2.pkl ] || fail "no checkpoints in ca: $(ls ca)"

# A replay of step 2 restores its checkpoint and records what the run did there.
DTRACE_REPLAY_STEP=2 DTRACE_LEVEL=layer DTRACE_OUT="$WORK/step2.jsonl" "$PYTHON" "$EXAMPLE" \
  --run-dir a --checkpoint-dir ca --steps 3 --level layer 2>"$WORK/replay.err" || { cat "$WORK/replay.err" >&2; fail "replay of step 2"; }
run_dtrace 0 diff --json a "$WORK/step2.jsonl"
json_is compared.steps '[2, 2]'

# A replay session driven by hand (session-lib.sh): two layer-level step
# replays of step 1 in one process give the same records as each other and as
# a launch: the second starts from the copy of step 1's start the first kept,
# not from where the first's SGD update left the parameters.
. "$E2E_LIB_DIR/session-lib.sh"
mapfile -t argv < <(head -n1 a/rank0.jsonl | jq -r '.replay.argv[]')
session_repeats_launch 1 1 "${argv[@]}"

# The planted reduction, one process.
nt --run-dir c --checkpoint-dir cc --steps 3 --level layer --planted --chaos-seed 1
nt --run-dir d --checkpoint-dir cd --steps 3 --level layer --planted --chaos-seed 2
run_dtrace 1 diff --json c d
json_is first.step 0
json_is first.scope '"fwd/layer.1"'
json_is first.role '"origin"'
run_dtrace 0 bisect --trust --json
bisected 0
json_true '[(c["scope"], c["op"]) for c in d["culprits"]] == [("fwd/layer.1", "gemm")]'
json_true 'd["search"]["end"].endswith("nothing else differs with it pinned")'

# Two planted reductions (every culprit, dtrace(1)): forward and backward,
# both named in one bisect, in the order --print-planted lists them (a step's).
nt --run-dir c2 --checkpoint-dir cc2 --steps 2 --level layer --nondet fwd-gemm,bwd-gemm --chaos-seed 1
nt --run-dir d2 --checkpoint-dir cd2 --steps 2 --level layer --nondet fwd-gemm,bwd-gemm --chaos-seed 2
truth=$("$PYTHON" "$EXAMPLE" --nondet fwd-gemm,bwd-gemm --print-planted | jq -sc '[.[] | [.scope, .op]]')
run_dtrace 0 bisect --trust --json --step 0 --rank 0 c2 d2
json_true "[[c['scope'], c['op']] for c in d['culprits']] == $truth"
json_true 'd["culprits"][1]["pinned"] == ["fwd/layer.1 gemm"] and d["search"]["stop"] == "agree"'

# A program that passes no isolate=: bisect stops at the kernel stage (exit 2)
# with the workload's own word for why, and says which layer it had localized.
nt --run-dir g --checkpoint-dir cg --steps 1 --level layer --planted --chaos-seed 1 --no-isolate
nt --run-dir h --checkpoint-dir ch --steps 1 --level layer --planted --chaos-seed 2 --no-isolate
run_dtrace 2 bisect --trust g h
grep "^dtrace: error: " "$ERR" | grep -qF "the layer pass localized step 0, rank 0 to layer fwd/layer.1 (its inputs match, its outputs differ); then replay of run A (kernel) failed" ||
  fail "the error does not name the layer localized before the failure"
err_has "this program cannot re-run a layer or op alone (it passed no isolate= to dtrace.Recorder)"

# Three processes through a plain launcher, the plant on rank 1 only.
for r in e f; do
  seed=$([ $r = e ] && echo 1 || echo 2)
  DTRACE_PYTHON_LAUNCHER="$LAUNCH" $LAUNCH "$PYTHON" "$EXAMPLE" --run-dir $r --checkpoint-dir c$r --steps 3 \
    --level layer --planted --planted-rank 1 --chaos-seed "$seed" >/dev/null 2>"$WORK/$r.err" ||
    { cat "$WORK/$r.err" >&2; fail "launching run $r"; }
done
[ -f ce/rank0/step-0.pkl ] && [ -f ce/rank2/step-0.pkl ] || fail "no per-rank checkpoints in ce"
run_dtrace 0 check e
run_dtrace 1 diff --json e f
json_is first.rank 1
# Rank 1's steps after its first difference are not vouched for by its chains.
run_dtrace 1 diff e f
out_has "(the steps before each rank's first difference known equal by their chains)"
out_lacks "the other steps known equal"
run_dtrace 0 bisect --trust --json e f
bisected 1
json_is ranks_replayed '[0, 1, 2]'
err_has "launch.py 3"
# Asked for a later step, bisect follows rank 1, the one diverged since step
# 0, and says the runs diverged earlier (their configurations differ: no
# replay of step 2 compares like with like). Rank 0, which never diverged,
# was followed before, and the replays' state difference on rank 1 was then
# called a restore that missed state; asked for rank 0 by name, the same
# answer comes from the restore check run again on rank 1.
for rank in "" "--rank 0"; do
  # shellcheck disable=SC2086
  run_dtrace 1 bisect --trust --json --step 2 $rank e f
  json_is verdict '"diverged-earlier"'
  json_is rank 1
  json_is earlier.step 0
  json_is earlier.rank 1
  json_is state null
  # Without --rank, rank 1 is followed from the start (dtrace(1): the rank
  # diff names there); asked for rank 0, the replays lead to rank 1.
  if [ -z "$rank" ]; then
    json_true 'not any("following rank" in n for n in d["notes"])'
  else
    json_true 'any("rank 0 did not diverge in the replays; following rank 1" in n for n in d["notes"])'
  fi
done

# docs/python.md's example, as printed there: two runs are identical, and a
# replay of its step 1 records what the run did there.
"$PYTHON" - "$SOURCE_ROOT/docs/python.md" >regress.py <<'PY' || fail "no regress.py in docs/python.md"
import re, sys
text = open(sys.argv[1]).read()
print(re.search(r"```python\n(#!/usr/bin/env python3\n# regress\.py.*?)```", text, re.S).group(1), end="")
PY
"$PYTHON" regress.py ra && "$PYTHON" regress.py rb || fail "docs/python.md's regress.py"
run_dtrace 0 diff --json ra rb
json_is verdict '"identical"'
grep -q '"scope":"fwd/linear","op":"linear","io":"out","name":"y"' ra/rank0.jsonl || fail "regress.py recorded no fwd/linear y"
DTRACE_REPLAY_STEP=1 DTRACE_OUT="$WORK/r1.jsonl" "$PYTHON" regress.py ra || fail "replay of regress.py's step 1"
run_dtrace 0 diff --json ra "$WORK/r1.jsonl"
json_is compared.steps '[1, 1]'
# What it shows a new user: checkpoint_every=0 writes step 0's checkpoint
# alone (the replay above ran step 0 from it); a record outside any scope is
# in scope step; its isolate, fed from a capture of step 1 as bisect's kernel
# pass takes it, finds the input's dtype and shape, makes its array from
# numpy_dtype, takes read_into's return as the input, and computes the run's y
# in each of iso.repeat repetitions.
[ "$(ls ra.ckpt)" = step-0.pkl ] || fail "checkpoint_every=0 wrote: $(ls ra.ckpt)"
grep -q '"step":1,"rank":0,"seq":[0-9]*,"scope":"step","op":"residual","io":"out","name":"r","dtype":"f32","shape":\[8\]' \
  ra/rank0.jsonl || fail "regress.py's residual is not a step-scope record: $(grep residual ra/rank0.jsonl | head -1)"
DTRACE_REPLAY_STEP=1 DTRACE_LEVEL=kernel DTRACE_SCOPE=fwd/linear DTRACE_CAPTURE="$WORK/rcap" \
  DTRACE_OUT="$WORK/rcap.jsonl" "$PYTHON" regress.py ra 2>"$ERR" || { cat "$ERR" >&2; fail "capture of regress.py's step 1"; }
DTRACE_REPLAY_STEP=1 DTRACE_LEVEL=kernel DTRACE_ISOLATE=fwd/linear DTRACE_INPUTS="$WORK/rcap" DTRACE_REPEAT=2 \
  DTRACE_OUT="$WORK/riso.jsonl" "$PYTHON" regress.py ra 2>"$ERR" || { cat "$ERR" >&2; fail "isolation of regress.py's fwd/linear"; }
run_dtrace 0 check riso.jsonl
"$PYTHON" - ra/rank0.jsonl riso.jsonl <<'PY' || fail "regress.py's layer re-run alone did not compute the run's y"
import json, sys
run, iso = ([json.loads(line) for line in open(name)][1:] for name in sys.argv[1:])
want = [r["hash"] for r in run if r.get("step") == 1 and r.get("scope") == "fwd/linear" and r.get("name") == "y"]
got = [(r["step"], r["hash"]) for r in iso if r.get("name") == "y"]
ops = {(r["scope"], r["op"], r["io"]) for r in iso if "op" in r}
assert len(want) == 1 and got == [(0, want[0]), (1, want[0])], (want, got)
assert ops == {("fwd/linear", "linear", "in"), ("fwd/linear", "linear", "out")}, ops
PY

# As `meson install` leaves it (relocated to a scratch root, as a DESTDIR
# package would be): the package beside dtrace_torch in python3's site
# directory, importable with no PYTHONPATH, records the same run.
: "${PYTHON_DIR:?}" "${PREFIX:?}" "${LIBDIR:?}"
meson install -C "$BUILD_ROOT" --destdir "$WORK/root" --no-rebuild --quiet >/dev/null || fail "meson install"
site="$WORK/root$PYTHON_DIR"
[ -f "$site/dtrace/recording.py" ] && [ -f "$site/dtrace/capi.py" ] && [ -f "$site/dtrace_torch/recording.py" ] ||
  fail "the dtrace package is not installed beside dtrace_torch in $PYTHON_DIR"
case "$LIBDIR" in /*) libdir="$LIBDIR" ;; *) libdir="$PREFIX/$LIBDIR" ;; esac
env -u PYTHONPATH LD_LIBRARY_PATH="$WORK/root$libdir" PYTHONPATH="$site" "$PYTHON" -c '
import sys, dtrace
assert dtrace.__file__.startswith(sys.argv[1]), dtrace.__file__' "$site" || fail "the installed package does not import"
env -u PYTHONPATH LD_LIBRARY_PATH="$WORK/root$libdir" PYTHONPATH="$site" "$PYTHON" regress.py rinst ||
  fail "regress.py on the installed package"
run_dtrace 0 diff ra rinst

# dtrace verify runs it as arms (DTRACE_RUN_DIR, DTRACE_CHECKPOINT_DIR,
# DTRACE_STOP_AT, DTRACE_RESUME_AT): the resumed arm is the same trajectory.
run_dtrace 0 verify --json --resume-at 2 -- "$PYTHON" "$EXAMPLE" --steps 4 --run-dir v
json_is certified true
echo ok
