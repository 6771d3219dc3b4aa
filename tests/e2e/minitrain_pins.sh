#!/usr/bin/env bash
# Pinned ops (dtrace-replay/1.3, DTRACE_PIN; issue 40), without dtrace bisect:
# two runs with a plant differ from step 0; A's step 0 replayed at kernel level
# with a capture of the planted op's layer gives the pins (only the planted
# op's out records, as bisect writes them). Replays of step 0 of both runs with
# DTRACE_PIN then agree record for record where replays without it differ, and
# each rank acknowledges its pin in DTRACE_OUT_DIR/rank<r>.pins. With two
# plants, pinning the first leaves the second's difference, an origin at its
# op: in another layer (splitk,atomic-bias-grad) and in the same layer, fed by
# the pinned op (splitk-fc1,splitk). An isolated layer's repetitions and a
# replay session's requests take the pins too.
. "$(dirname "$0")/minitrain-lib.sh"

# planted_field NONDET JQ: a field of minitrain's ground truth for NONDET.
planted_field() { "$MINITRAIN" --print-planted "$1" | jq -r "$2"; }

# two_runs NAME ARGS...: runs NAME-a and NAME-b, one step, chaos seeds 1 and 2.
two_runs() {
  local name=$1; shift
  mt --steps 1 --level step "$@" --chaos-seed 1 --out "$name-a"
  mt --steps 1 --level step "$@" --chaos-seed 2 --out "$name-b"
}

# replay RUN DIR [VAR=VALUE...]: RUN's step 0 replayed at kernel level (unless a
# variable says otherwise) into DIR, through the run's own replay argv.
replay() {
  local run=$1 dir=$2; shift 2
  local argv
  mapfile -t argv < <(replay_argv "$run")
  env DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=kernel DTRACE_OUT_DIR="$WORK/$dir" "$@" "${argv[@]}" \
    >/dev/null 2>"$WORK/replay.err" || { cat "$WORK/replay.err" >&2; fail "replay of $run into $dir"; }
}

# pin_capture CAPTURE PINS SCOPE OP...: of a capture, the OPs' out records in
# SCOPE and their bytes, each rank's index ending its step with the count it keeps.
pin_capture() {
  local capture=$1 pins=$2 scope=$3 index name; shift 3
  local ops="$*"
  mkdir -p "$pins"
  for index in "$capture"/capture.rank*.jsonl; do
    name=$(basename "$index")
    jq -c --arg scope "$scope" --arg ops "$ops" \
      '. as $r | select($r.scope == $scope and $r.io == "out" and any(($ops | split(" "))[]; . == $r.op))' \
      "$index" >"$WORK/kept"
    [ -s "$WORK/kept" ] || fail "$index holds no out record of $scope $ops"
    { head -n1 "$index"; cat "$WORK/kept"
      jq -cs '{step: .[0].step, rank: .[0].rank, end: true, count: length}' "$WORK/kept"; } >"$pins/$name"
    jq -r .file "$WORK/kept" | while read -r file; do cp "$capture/$file" "$pins/$file"; done
  done
}

# first_difference DIR_A DIR_B: "scope op role" of the first divergence between
# two replays (each directory read as a run, beside its rank<r>.pins), or "identical".
first_difference() {
  local status=0
  "$DTRACE" diff --json "$WORK/$1" "$WORK/$2" >"$WORK/diff.json" 2>"$WORK/diff.err" || status=$?
  case $status in
    0) echo identical ;;
    1) jq -r '[.first.scope, .first.op, .first.role] | join(" ")' "$WORK/diff.json" ;;
    *) cat "$WORK/diff.err" >&2; fail "dtrace diff $1 $2 exited $status" ;;
  esac
}

# expect_difference WHAT GOT WANT
expect_difference() { [ "$2" = "$3" ] || fail "$1: first difference '$2', expected '$3'"; }

# --- One plant, two ranks -----------------------------------------------------
two_runs one --ranks 2 --nondet splitk
[ "$(head -n1 one-a/rank0.jsonl | jq -r .replay.protocol)" = dtrace-replay/1.3 ] ||
  fail "minitrain does not announce dtrace-replay/1.3"
scope=$(planted_field splitk .scope); op=$(planted_field splitk .op)
replay one-a one-capture DTRACE_SCOPE="$scope" DTRACE_CAPTURE="$WORK/one-cap"
pin_capture one-cap one-pins "$scope" "$op"

replay one-a one-free-a
replay one-b one-free-b
expect_difference "unpinned" "$(first_difference one-free-a one-free-b)" "$scope $op origin"

replay one-a one-pinned-a DTRACE_PIN="$WORK/one-pins"
replay one-b one-pinned-b DTRACE_PIN="$WORK/one-pins"
expect_difference "splitk pinned" "$(first_difference one-pinned-a one-pinned-b)" identical
# B's replay took A's captured output.
want=$(jq -r --arg s "$scope" --arg o "$op" 'select(.scope == $s and .op == $o and .io == "out") | .hash' one-capture/rank1.jsonl)
got=$(jq -r --arg s "$scope" --arg o "$op" 'select(.scope == $s and .op == $o and .io == "out") | .hash' one-pinned-b/rank1.jsonl)
[ -n "$want" ] && [ "$got" = "$want" ] || fail "rank 1's pinned output is $got, the capture's $want"
for rank in 0 1; do
  [ "$(cat "one-pinned-b/rank$rank.pins")" = '{"step":0,"pinned":1}' ] ||
    fail "rank$rank.pins: $(cat "one-pinned-b/rank$rank.pins")"
done
[ ! -e one-free-b/rank0.pins ] || fail "a replay without DTRACE_PIN acknowledged pins"

# At layer level the op's records are not written, and it is pinned all the same.
replay one-a one-layer-a DTRACE_LEVEL=layer DTRACE_PIN="$WORK/one-pins"
replay one-b one-layer-b DTRACE_LEVEL=layer DTRACE_PIN="$WORK/one-pins"
expect_difference "splitk pinned, layer level" "$(first_difference one-layer-a one-layer-b)" identical
[ "$(cat one-layer-b/rank0.pins)" = '{"step":0,"pinned":1}' ] || fail "layer level: no pin taken"

# --- Two plants in two layers -------------------------------------------------
two_runs layers --nondet splitk,atomic-bias-grad
[ "$(planted_field splitk,atomic-bias-grad '[.plants[] | .scope + " " + .op] | join(", ")')" = \
  "fwd/layer.0/mlp gemm_fc2, bwd/layer.1/mlp bias_grad_fc1" ] || fail "print-planted: two plants"
replay layers-a layers-capture DTRACE_SCOPE=fwd/layer.0/mlp DTRACE_CAPTURE="$WORK/layers-cap"
pin_capture layers-cap layers-pins fwd/layer.0/mlp gemm_fc2
replay layers-a layers-free-a
replay layers-b layers-free-b
expect_difference "two layers, unpinned" "$(first_difference layers-free-a layers-free-b)" \
  "fwd/layer.0/mlp gemm_fc2 origin"
replay layers-a layers-pinned-a DTRACE_PIN="$WORK/layers-pins"
replay layers-b layers-pinned-b DTRACE_PIN="$WORK/layers-pins"
expect_difference "two layers, splitk pinned" "$(first_difference layers-pinned-a layers-pinned-b)" \
  "bwd/layer.1/mlp bias_grad_fc1 origin"

# --- Two plants in one layer, the first feeding the second --------------------
two_runs chain --nondet splitk-fc1,splitk
replay chain-a chain-capture DTRACE_SCOPE=fwd/layer.0/mlp DTRACE_CAPTURE="$WORK/chain-cap"
pin_capture chain-cap chain-pins fwd/layer.0/mlp gemm_fc1
replay chain-a chain-free-a
replay chain-b chain-free-b
expect_difference "one layer, unpinned" "$(first_difference chain-free-a chain-free-b)" \
  "fwd/layer.0/mlp gemm_fc1 origin"
replay chain-a chain-pinned-a DTRACE_PIN="$WORK/chain-pins"
replay chain-b chain-pinned-b DTRACE_PIN="$WORK/chain-pins"
expect_difference "one layer, gemm_fc1 pinned" "$(first_difference chain-pinned-a chain-pinned-b)" \
  "fwd/layer.0/mlp gemm_fc2 origin"
# Both pinned (a capture of both ops' outputs): nothing else differs.
pin_capture chain-cap chain-both fwd/layer.0/mlp gemm_fc1 gemm_fc2
replay chain-a chain-both-a DTRACE_PIN="$WORK/chain-both"
replay chain-b chain-both-b DTRACE_PIN="$WORK/chain-both"
expect_difference "one layer, both pinned" "$(first_difference chain-both-a chain-both-b)" identical
[ "$(cat chain-both-b/rank0.pins)" = '{"step":0,"pinned":2}' ] || fail "both pinned: $(cat chain-both-b/rank0.pins)"

# --- An isolated layer's repetitions ask too ----------------------------------
mapfile -t argv < <(replay_argv one-b)
DTRACE_ISOLATE=fwd/layer.0/mlp DTRACE_INPUTS="$WORK/one-cap" DTRACE_REPEAT=3 DTRACE_PIN="$WORK/one-pins" \
  DTRACE_OUT_DIR="$WORK/isolated" "${argv[@]}" >/dev/null
outputs=$(jq -r 'select(.rank == 0 and .op == "mlp" and .io == "out" and .name == "y") | .hash' isolated/rank0.jsonl | sort -u | wc -l)
[ "$outputs" = 1 ] || fail "pinned, the isolated layer gave $outputs outputs over 3 repetitions"
[ "$(jq -c . isolated/rank0.pins | tr '\n' ' ')" = '{"step":0,"pinned":1} {"step":1,"pinned":1} {"step":2,"pinned":1} ' ] ||
  fail "isolated pins: $(cat isolated/rank0.pins)"

# --- A replay session: a pinned request answers as a launch does --------------
# (bisect sends its pinned replays to the sides' sessions), and the pins end
# with their request: the next one, unpinned, answers as an unpinned launch.
. "$E2E_LIB_DIR/session-lib.sh"
mapfile -t argv < <(replay_argv one-b)
session_start "$WORK/session" 0 "${argv[@]}"
session_serve 0 "$WORK/s0" 2 DTRACE_LEVEL=layer
session_serve 1 "$WORK/s1" 2 DTRACE_LEVEL=kernel "DTRACE_PIN=$WORK/one-pins"
session_serve 2 "$WORK/s2" 2 DTRACE_LEVEL=kernel
session_end 3
expect_difference "session, pinned" "$(first_difference s1 one-pinned-b)" identical
expect_difference "session, unpinned after pinned" "$(first_difference s2 one-free-b)" identical
[ "$(cat s1/rank1.pins)" = '{"step":0,"pinned":1}' ] || fail "session: rank1.pins: $(cat s1/rank1.pins)"
[ ! -e s2/rank0.pins ] || fail "session: an unpinned request acknowledged pins"
echo ok
