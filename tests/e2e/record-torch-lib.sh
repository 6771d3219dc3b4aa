# Shared by tests/e2e/record_torch_*.sh (sourced): the proof that `dtrace
# record -- CMD` records and bisects a PyTorch program with no line of dtrace in
# it (issue 39). tools/torch/plain_lm.py is the torch tests' LM (gpt_moe.py's
# model and sampler, the same --nondet causes) in a plain training loop; it runs
# under `dtrace record` with PYTHONPATH unset, so whatever of dtrace its
# processes load, dtrace record put there. What it finds is compared with what
# gpt_moe.py's explicit Recorder finds with the same switch.
. "$(dirname "$0")/torch-lib.sh"
PLAIN="$SOURCE_ROOT/tools/torch/plain_lm.py"

# record DIR CMD...: `dtrace record --out DIR -- CMD...` exits 0; its stdout
# and stderr (the program's, then record's summary) are kept in
# $WORK/record-DIR.out and .err (a / in DIR as -).
record() {
  local dir=$1
  shift
  local log="$WORK/record-${dir//\//-}"
  env -u PYTHONPATH "$DTRACE" record --out "$dir" -- "$@" >"$log.out" 2>"$log.err" ||
    { cat "$log.err" >&2; fail "dtrace record --out $dir -- $*"; }
  [ -f "$dir/rank0.jsonl" ] || fail "dtrace record --out $dir wrote no rank0.jsonl"
}

# plain DIR ARGS...: plain_lm.py ARGS recorded into DIR (the model's defaults:
# 2 layers of width 32, batches of 8).
plain() {
  local dir=$1
  shift
  record "$dir" "$PYTHON" "$PLAIN" "$@"
}

# explicit DIR ARGS...: gpt_moe.py ARGS recorded by its own Recorder into DIR,
# a checkpoint every step (what its replays restore).
explicit() {
  local dir=$1
  shift
  ex --run-dir "$dir" --checkpoint-dir "ck-$dir" --checkpoint-every 1 "$@"
}

# bisect_into FILE A B: `dtrace bisect --trust --json A B` exits 0; its
# document is kept in FILE (and is $OUT until the next dtrace command).
bisect_into() {
  run_dtrace 0 bisect --trust --timeout 900 --json "$2" "$3"
  cp "$OUT" "$1"
}

# same_culprit EXPLICIT RECORDED: two bisect documents name the same cause:
# the verdict, the layer, and the culprit's op, scope, occurrence, rank, role,
# step and basis. Prints the culprit on success (the test's log).
same_culprit() {
  python3 - "$1" "$2" <<'PY' || fail "dtrace record's bisect names another cause than the explicit recorder's"
import json, sys
explicit, recorded = (json.load(open(p)) for p in sys.argv[1:3])
def cause(d):
    c = d["culprit"] or {}
    return {"verdict": d["verdict"], "layer": d.get("layer"),
            **{k: c.get(k) for k in ("op", "scope", "occurrence", "rank", "role", "step", "basis")}}
a, b = cause(explicit), cause(recorded)
assert a["verdict"] == "named", ("the explicit recorder's bisect named nothing", a)
if a != b:
    sys.exit(f"explicit recorder: {a}\ndtrace record:     {b}")
print("both name:", b)
PY
}
