#!/usr/bin/env bash
# examples/tinytrain (argument tinytrain, C++) and examples/ctrain (argument
# ctrain, the C API) honour pins (dtrace-replay/1.3, dtrace-fp(5) "Pinned
# ops"), shown by hand, without bisect: two runs with a planted
# nondeterministic op, step 0 of each replayed at kernel level. Unpinned, the
# replays differ at the planted op. With DTRACE_PIN naming the planted op's
# outputs from a capture of run A's step 0 (made with DTRACE_CAPTURE and
# DTRACE_SCOPE its layer, then cut down to that op's out records, as bisect's
# pin capture is), the two replays agree record for record, the pinned op's
# out record holds the pinned bytes, and each replay's rank0.pins counts
# the pins it took. With two plants, pinning the first leaves the second
# visible, an origin in its own layer; pinning both, the replays agree.
. "$(dirname "$0")/lib.sh"
: "${BUILD_ROOT:?}"
workload=${1:?usage: examples_pins.sh tinytrain|ctrain}

# Per workload: how to record a run with one plant (ONE) or two (TWO) and
# seed S (ctrain's chaos seed; tinytrain draws its own), and the planted ops
# as "scope op output": the single plant, then the two in the order a step
# runs them (the first feeds the second).
case $workload in
  tinytrain)
    program=$BUILD_ROOT/examples/tinytrain
    one=(--nondet) two=(--nondet "layer.0,layer.1")
    seed() { :; }
    single="fwd/layer.1 matmul z" first="fwd/layer.0 matmul z" second="fwd/layer.1 matmul z"
    both_scope=fwd ;;
  ctrain)
    program=$BUILD_ROOT/examples/ctrain
    one=(--planted) two=(--planted "gemm,wgrad")
    seed() { echo --chaos-seed "$1"; }
    single="fwd/layer.1 gemm y" first="fwd/layer.1 gemm y" second="bwd/layer.0 grad_w gw0"
    both_scope="" ;;  # fwd and bwd: the whole step
  *) fail "unknown workload $workload" ;;
esac

# record NAME SEED PLANT...: a run at layer level, 2 steps.
record() {
  local name=$1 s=$2; shift 2
  # shellcheck disable=SC2046 # seed's words are the flag and its value
  "$program" --steps 2 --level layer --out "$WORK/$name" --checkpoint-dir "$WORK/$name.ck" \
    $(seed "$s") "$@" >/dev/null 2>"$WORK/$name.err" || fail "$workload $*: $(cat "$WORK/$name.err")"
}

# replay RUN DIR VAR=VALUE...: step 0 of RUN replayed at kernel level by its
# header's replay command, into DIR (DTRACE_OUT_DIR), with these variables.
replay() {
  local run=$1 dir=$2; shift 2
  local argv
  mapfile -t argv < <(head -n1 "$WORK/$run/rank0.jsonl" | jq -r '.replay.argv[]')
  env DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=kernel "DTRACE_OUT_DIR=$WORK/$dir" "$@" "${argv[@]}" \
    >/dev/null 2>"$WORK/$dir.err" || fail "$workload: the replay into $dir failed: $(cat "$WORK/$dir.err")"
}

# pin_capture SOURCE DEST "SCOPE OP OUTPUT"...: a capture directory holding
# only those ops' out records of SOURCE (a capture of step 0), renumbered, with
# their bytes: what bisect hands a replay in DTRACE_PIN.
pin_capture() {
  local source=$1 dest=$2; shift 2
  mkdir "$WORK/$dest" || fail "mkdir $dest"
  python3 - "$WORK/$source" "$WORK/$dest" "$@" <<'EOF' || fail "cannot cut $source down to $*"
import json, os, shutil, sys
source, dest, wanted = sys.argv[1], sys.argv[2], {tuple(w.split()) for w in sys.argv[3:]}
lines = [json.loads(l) for l in open(os.path.join(source, "capture.rank0.jsonl"))]
kept = [r for r in lines[1:] if "end" not in r and r["io"] == "out" and (r["scope"], r["op"], r["name"]) in wanted]
if {(r["scope"], r["op"], r["name"]) for r in kept} != wanted:
    sys.exit(f"{source} holds {sorted((r['scope'], r['op'], r['name']) for r in kept)}, wanted {sorted(wanted)}")
with open(os.path.join(dest, "capture.rank0.jsonl"), "w") as out:
    out.write(json.dumps(lines[0]) + "\n")
    for seq, r in enumerate(kept):
        shutil.copy(os.path.join(source, r["file"]), os.path.join(dest, f"r0-s0-q{seq}.bin"))
        r.update(seq=seq, file=f"r0-s0-q{seq}.bin")
        out.write(json.dumps(r) + "\n")
    out.write(json.dumps({"step": 0, "rank": 0, "end": True, "count": len(kept)}) + "\n")
EOF
}

# agree DIR1 DIR2: the two replays are identical (each directory, read as a
# run, beside its rank0.pins).
agree() {
  run_dtrace 0 diff --json "$WORK/$1" "$WORK/$2"
  json_is verdict '"identical"'
}

# differ_at DIR1 DIR2 "SCOPE OP OUTPUT": the replays first differ there, an origin.
differ_at() {
  local scope op name
  read -r scope op name <<<"$3"
  run_dtrace 1 diff --json "$WORK/$1" "$WORK/$2"
  json_is first.scope "\"$scope\""
  json_is first.op "\"$op\""
  json_is first.name "\"$name\""
  json_is first.role '"origin"'
}

# took DIR N [STEPS]: the replay in DIR says it took N pins at step 0 (and
# at each step up to STEPS-1: an isolation's repetitions).
took() {
  local got want="" k
  got=$(cat "$WORK/$1/rank0.pins" 2>/dev/null)
  for ((k = 0; k < ${3:-1}; ++k)); do want+="{\"step\":$k,\"pinned\":$2}"$'\n'; done
  [ "$got" = "${want%$'\n'}" ] || fail "$1/rank0.pins holds '$got', expected '${want%$'\n'}'"
}

# holds_pin DIR PIN "SCOPE OP OUTPUT" [STEPS]: the replay's out record of the
# op is the pinned one (in each of STEPS repetitions).
holds_pin() {
  local scope op name want got k
  read -r scope op name <<<"$3"
  local filter="select(.scope==\"$scope\" and .op==\"$op\" and .io==\"out\" and .name==\"$name\") | .hash"
  want=$(jq -r "$filter" "$WORK/$2/capture.rank0.jsonl")
  got=$(jq -r "$filter" "$WORK/$1/rank0.jsonl" | sort -u)
  if [ -z "$want" ] || [ "$got" != "$want" ]; then fail "$1: $3 out record hashes '$got', the pin's '$want'"; fi
  k=$(jq -r "$filter" "$WORK/$1/rank0.jsonl" | wc -l)
  [ "$k" = "${4:-1}" ] || fail "$1: $k out records of $3, expected ${4:-1}"
}

# ---- One plant. ------------------------------------------------------------
record a 1 "${one[@]}"
record b 2 "${one[@]}"
[ "$(head -n1 a/rank0.jsonl | jq -r .replay.protocol)" = dtrace-replay/1.3 ] ||
  fail "$workload does not announce pins: $(head -n1 a/rank0.jsonl | jq -c .replay)"
read -r scope _ <<<"$single"
replay a ua
replay b ub
differ_at ua ub "$single"
[ ! -e ua/rank0.pins ] || fail "a replay without DTRACE_PIN wrote rank0.pins"
replay a capture "DTRACE_SCOPE=$scope" "DTRACE_CAPTURE=$WORK/cap"
pin_capture cap pin "$single"
replay a pa "DTRACE_PIN=$WORK/pin"
replay b pb "DTRACE_PIN=$WORK/pin"
agree pa pb
took pa 1
took pb 1
holds_pin pa pin "$single"
# The whole layer's capture pins every op output in it: each is asked for.
replay a la "DTRACE_PIN=$WORK/cap"
replay b lb "DTRACE_PIN=$WORK/cap"
agree la lb
took la 2
took lb 2

# Pins hold in isolation's repetitions too: the planted op's layer alone,
# then the op alone, twice from the captured inputs, each repetition taking the pin.
read -r _ op _ <<<"$single"
isolate=("DTRACE_INPUTS=$WORK/cap" DTRACE_REPEAT=2 "DTRACE_PIN=$WORK/pin")
replay a il "DTRACE_ISOLATE=$scope" "${isolate[@]}"
took il 1 2
holds_pin il pin "$single" 2
replay a io "DTRACE_ISOLATE=$scope::$op" "${isolate[@]}"
took io 1 2
holds_pin io pin "$single" 2

# ---- Two plants. -----------------------------------------------------------
record a2 1 "${two[@]}"
record b2 2 "${two[@]}"
replay a2 ua2
replay b2 ub2
differ_at ua2 ub2 "$first"
replay a2 capture2 ${both_scope:+"DTRACE_SCOPE=$both_scope"} "DTRACE_CAPTURE=$WORK/cap2"
pin_capture cap2 pin-first "$first"
pin_capture cap2 pin-both "$first" "$second"
replay a2 pfa "DTRACE_PIN=$WORK/pin-first"
replay b2 pfb "DTRACE_PIN=$WORK/pin-first"
differ_at pfa pfb "$second"
took pfa 1
holds_pin pfb pin-first "$first"
replay a2 pba "DTRACE_PIN=$WORK/pin-both"
replay b2 pbb "DTRACE_PIN=$WORK/pin-both"
agree pba pbb
took pba 2
took pbb 2
holds_pin pbb pin-both "$second"
# The whole capture as the pin: every kernel's every output is asked for
# once, so the pins taken are its kernel-level out records (a layer's own
# records, op the scope's last part, are never asked for).
asked=$(jq -s '[.[1:][] | select(.io == "out" and .op != (.scope | split("/") | last))] | length' \
  cap2/capture.rank0.jsonl)
replay a2 pwa "DTRACE_PIN=$WORK/cap2"
replay b2 pwb "DTRACE_PIN=$WORK/cap2"
agree pwa pwb
took pwa "$asked"
took pwb "$asked"
echo ok
