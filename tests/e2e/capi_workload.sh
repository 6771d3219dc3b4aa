#!/usr/bin/env bash
# The recorder's C API as an integrator gets it: `meson install` into a scratch
# root, examples/ctrain/ctrain.c compiled with the installed dtrace.pc and
# headers only (built with the sanitizers when libdtrace was), then the
# walkthrough of dtrace-recorder(3): deterministic runs diff identical and
# certify, a replay of a step restores a checkpoint and fast-forwards to the
# run's bits, `dtrace verify` certifies the workload, two runs with the planted
# reordered reduction diverge and `dtrace bisect --trust` names the planted op
# and scope, and a bad DTRACE_* variable stops the workload with its name.
. "$(dirname "$0")/lib.sh"
: "${BUILD_ROOT:?}" "${SOURCE_ROOT:?}" "${PREFIX:?}" "${LIBDIR:?}"

meson install -C "$BUILD_ROOT" --destdir "$WORK/root" --no-rebuild --quiet >/dev/null
root="$WORK/root$PREFIX"
case "$LIBDIR" in /*) libdir="$WORK/root$LIBDIR" ;; *) libdir="$root/$LIBDIR" ;; esac
[ -f "$root/include/dtrace/recorder.h" ] || fail "recorder.h not installed under $root/include"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --define-variable=prefix="$root" --cflags --libs dtrace) ||
  fail "pkg-config dtrace"
sanitize=""
needed=$(ldd "$libdir/libdtrace.so")
case "$needed" in *libasan*) sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined" ;; esac
# shellcheck disable=SC2086 # flags and sanitize are word lists
${CC:-cc} -std=c11 -Wall -Wextra -Werror $sanitize -o "$WORK/ctrain" \
  "$SOURCE_ROOT/examples/ctrain/ctrain.c" $flags -Wl,-rpath,"$libdir" -lm ||
  fail "ctrain does not build against the installed library"

# ct ARGS...: ctrain, quiet on success.
ct() { "$WORK/ctrain" "$@" >/dev/null 2>"$WORK/ctrain.err" || { cat "$WORK/ctrain.err" >&2; fail "ctrain $*"; }; }

# Deterministic: two runs agree bit for bit, and each log certifies.
ct --out det-a --steps 4 --level layer
ct --out det-b --steps 4 --level layer
run_dtrace 0 diff --json det-a det-b
json_is verdict '"identical"'
json_is compared.steps '[0, 3]'
# The recorder behind the C API writes chained step digests: the diff searched them.
json_true 'any(n.startswith("searched by chained step digests") for n in d["notes"])'
run_dtrace 0 check det-a
[ -f det-a.ckpt/ckpt-2.bin ] || fail "no checkpoint at step 2"

# A replay of step 3 restores the checkpoint of step 2, fast-forwards step 2
# without recording it, records step 3 alone, and writes nothing of the run's.
before=$(find det-a det-a.ckpt | sort)
DTRACE_OUT="$WORK/replay3.jsonl" DTRACE_REPLAY_STEP=3 DTRACE_LEVEL=layer ct --out det-a --steps 4 --level layer
[ "$(find det-a det-a.ckpt | sort)" = "$before" ] || fail "a replay wrote into the run's directory"
python3 -c '
import json, sys
steps = {json.loads(l).get("step") for l in open(sys.argv[1]) if "\"step\"" in l}
sys.exit(0 if steps == {3} else f"replay3.jsonl holds steps {sorted(steps)}, expected [3]")
' replay3.jsonl || fail "the replay recorded other steps than 3"
run_dtrace 0 diff --json det-a replay3.jsonl
json_is verdict '"identical"'
json_is compared.steps '[3, 3]'

# dtrace verify runs the workload as arms (DTRACE_RUN_DIR, DTRACE_CHECKPOINT_DIR,
# DTRACE_STOP_AT, DTRACE_RESUME_AT) and certifies it.
run_dtrace 0 verify --json -- "$WORK/ctrain" --steps 4 --out verify-run
json_is certified true
run_dtrace 0 verify --json --resume-at 2 -- "$WORK/ctrain" --steps 4 --out verify-resume
json_is certified true

# The planted reordered reduction: two runs diverge, bisect names it.
# Recorded at layer level: at step level the reordering's last-bit changes in
# the outputs can round away in the loss and first show in the next step's
# parameters.
ct --out a --steps 3 --level layer --planted --chaos-seed 1
ct --out b --steps 3 --level layer --planted --chaos-seed 2
run_dtrace 1 diff --json a b
json_is first.step 0
json_is first.scope '"fwd/layer.1"'
json_is first.role '"origin"'
run_dtrace 0 bisect --trust --json
json_is verdict '"named"'
json_is culprit.op '"gemm"'
json_is culprit.scope '"fwd/layer.1"'
json_is culprit.role '"origin"'
json_is culprit.step 0
json_true 'd["evidence"]["distinct_outputs"] >= 2'
# The reading is judged against the gemm's captured inputs too, read from the
# C API's capture: a reordered reduction.
json_true 'd["evidence"]["input_magnitude"] > 0 and d["evidence"]["magnitude"] in ("inputs", "output")'
json_true '"reduction order" in d["evidence"]["reading"]'
json_true 'all(r["exit"] == 0 for r in d["replays"])'

# The example of dtrace-recorder(3), as printed there, and its walkthrough.
sed -n '/example-begin/,/example-end/p' "$SOURCE_ROOT/man/dtrace-recorder.3" | sed '1d;$d' |
  sed 's/\\e/\\/g' >"$WORK/train.c"
# shellcheck disable=SC2086
${CC:-cc} -std=c11 -Wall -Wextra -Werror $sanitize -o "$WORK/train" "$WORK/train.c" $flags \
  -Wl,-rpath,"$libdir" || fail "the man page's example does not build"
mkdir man-example && cd man-example || fail "mkdir"
"$WORK/train" && mv run run-a && "$WORK/train" && mv run run-b || fail "train"
run_dtrace 0 check run-a
run_dtrace 0 diff run-a run-b
DTRACE_REPLAY_STEP=3 DTRACE_OUT=step3.jsonl "$WORK/train" || fail "train replaying step 3"
run_dtrace 0 diff --json run-a step3.jsonl
json_is compared.steps '[3, 3]'
# Isolation of its op from a capture of step 3: three repetitions, each the
# run's output bit for bit.
DTRACE_REPLAY_STEP=3 DTRACE_LEVEL=kernel DTRACE_SCOPE=fwd DTRACE_CAPTURE=cap DTRACE_OUT=k3.jsonl \
  "$WORK/train" || fail "train capturing step 3"
DTRACE_REPLAY_STEP=3 DTRACE_LEVEL=kernel DTRACE_ISOLATE=fwd::scale DTRACE_INPUTS=cap \
  DTRACE_REPEAT=3 DTRACE_OUT=iso.jsonl "$WORK/train" || fail "train isolating fwd::scale"
run_dtrace 0 check iso.jsonl
python3 -c '
import json, sys
records = [json.loads(l) for l in open(sys.argv[1])][1:]
want = [r["hash"] for r in records if r.get("op") == "scale" and r.get("name") == "y"]
got = [json.loads(l) for l in open(sys.argv[2])][1:]
ys = [r["hash"] for r in got if r.get("name") == "y"]
ops = {r["op"] for r in got if "op" in r}
steps = sorted({r["step"] for r in got if "end" in r})
ok = ys == want * 3 and ops == {"scale"} and steps == [0, 1, 2]
sys.exit(0 if ok else f"isolation: y {ys} (want 3 x {want}), ops {ops}, steps {steps}")
' k3.jsonl iso.jsonl || fail "the isolated op did not repeat the run's output"
cd "$WORK" || fail "cd"

# A bad variable stops the workload, naming it, before anything is written.
got=0
DTRACE_LEVEL=fine "$WORK/ctrain" --out bad --steps 1 2>"$ERR" >/dev/null || got=$?
[ "$got" = 2 ] || fail "DTRACE_LEVEL=fine: exit $got, expected 2"
err_has "DTRACE_LEVEL=fine: not one of step, layer, kernel"
[ ! -e bad ] || fail "a refused start created its run directory"
echo ok
