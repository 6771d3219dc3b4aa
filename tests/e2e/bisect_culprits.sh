#!/usr/bin/env bash
# Every culprit in one bisect (dtrace(1), EVERY CULPRIT; dtrace-fp(5),
# "Pinned ops"), on examples/tinytrain (argument tinytrain, C++) and
# examples/ctrain (argument ctrain, the C API): two runs with two planted
# nondeterministic ops, one feeding the other (tinytrain) or in different
# layers, forward and backward (ctrain), are bisected once: both ops are
# named, in the order the step runs them, the second with the first pinned,
# and the search ends because the replays agree with both pinned. One plant:
# one culprit, "nothing else differs with it pinned". --first stops at the
# first. Sessions and --launches alike. minitrain (arguments minitrain-layers:
# split-K gemm_fc2 forward and the atomic bias gradient backward;
# minitrain-chain: two split-K gemms in one layer, fc1 feeding fc2), 2 ranks,
# against its own ground truth (--print-planted's plants, in step order).
. "$(dirname "$0")/lib.sh"
: "${BUILD_ROOT:?}"
workload=${1:?usage: bisect_culprits.sh tinytrain|ctrain|minitrain-layers|minitrain-chain}

case $workload in
  tinytrain)
    program=$BUILD_ROOT/examples/tinytrain
    one=(--nondet) two=(--nondet "layer.0,layer.1")
    seed() { :; }
    single="fwd/layer.1 matmul" first="fwd/layer.0 matmul" second="fwd/layer.1 matmul" ;;
  ctrain)
    program=$BUILD_ROOT/examples/ctrain
    one=(--planted) two=(--planted "gemm,wgrad")
    seed() { echo --chaos-seed "$1"; }
    single="fwd/layer.1 gemm" first="fwd/layer.1 gemm" second="bwd/layer.0 grad_w" ;;
  minitrain-*)
    program=$BUILD_ROOT/tools/minitrain/minitrain
    plants=splitk,atomic-bias-grad && [ "$workload" = minitrain-chain ] && plants=splitk-fc1,splitk
    one=(--nondet splitk) two=(--nondet "$plants")
    seed() { echo --chaos-seed "$1"; }
    truth() { "$program" --print-planted "$1" | jq -r "$2"; }
    single=$(truth splitk '"\(.scope) \(.op)"')
    first=$(truth "$plants" '.plants[0] | "\(.scope) \(.op)"')
    second=$(truth "$plants" '.plants[1] | "\(.scope) \(.op)"') ;;
  *) fail "unknown workload $workload" ;;
esac

# record NAME SEED PLANT...: a run of 2 steps, a checkpoint at each (minitrain:
# 2 ranks, each step a checkpoint of its own).
record() {
  local name=$1 s=$2; shift 2
  local shape=(--checkpoint-every 1 --checkpoint-dir "$WORK/$name.ck")
  case $workload in minitrain-*) shape+=(--ranks 2) ;; esac
  # shellcheck disable=SC2046 # seed's words are the flag and its value
  "$program" --steps 2 --out "$WORK/$name" "${shape[@]}" \
    $(seed "$s") "$@" >/dev/null 2>"$WORK/$name.err" || fail "$workload $*: $(cat "$WORK/$name.err")"
}

# culprits JSON: the culprits' "scope op", one per line.
culprits() { jq -r '.culprits[] | "\(.scope) \(.op)"' <<<"$1"; }

cd "$WORK" || fail "no work directory"
record one-a 1 "${one[@]}"
record one-b 2 "${one[@]}"
record two-a 1 "${two[@]}"
record two-b 2 "${two[@]}"

for mode in sessions launches; do
  flags=(--trust --json)
  [ "$mode" = launches ] && flags+=(--launches)

  run_dtrace 0 bisect two-a two-b --step 0 --rank 0 "${flags[@]}"
  out=$(cat "$OUT")
  [ "$(jq -r .schema_version <<<"$out")" = 1.7 ] || fail "schema_version $(jq -r .schema_version <<<"$out")"
  [ "$(culprits "$out")" = "$first"$'\n'"$second" ] ||
    fail "$mode: two plants named $(culprits "$out" | paste -sd,), expected $first, $second"
  # The first culprit is still the report's own culprit, for scripts that predate the list.
  [ "$(jq -r '"\(.culprit.scope) \(.culprit.op)"' <<<"$out")" = "$first" ] || fail "$mode: culprit is not $first"
  [ "$(jq -r '.culprits[1].pinned | join(",")' <<<"$out")" = "$first" ] ||
    fail "$mode: the second culprit was not searched with the first pinned"
  [ "$(jq -r '.culprits[1].basis' <<<"$out")" = confirmed ] || fail "$mode: the second culprit is not confirmed alone"
  [ "$(jq -r .search.stop <<<"$out")" = agree ] || fail "$mode: the search ended with $(jq -c .search <<<"$out")"
  jq -e '.search.end | test("^with .* pinned, the replays of step 0 agree over 3 attempts: nothing else differs with them pinned$")' \
    <<<"$out" >/dev/null || fail "$mode: search.end $(jq -r .search.end <<<"$out")"
  # The pinned replays carried DTRACE_PIN; the first culprit's did not.
  first_end=$(jq -r '.culprits[0].replays[1]' <<<"$out")
  jq -e --argjson n "$first_end" '[.replays[:$n][] | select(.env.DTRACE_PIN)] | length == 0' <<<"$out" >/dev/null ||
    fail "$mode: a replay before the first culprit was named carried DTRACE_PIN"
  jq -e --argjson n "$first_end" '[.replays[$n:][] | select(.stage == "layer") | .env.DTRACE_PIN] | all' <<<"$out" \
    >/dev/null || fail "$mode: a pinned round's layer replay without DTRACE_PIN"

  run_dtrace 0 bisect one-a one-b --step 0 --rank 0 "${flags[@]}"
  STDOUT=$(cat "$OUT")
  [ "$(culprits "$STDOUT")" = "$single" ] || fail "$mode: one plant named $(culprits "$STDOUT" | paste -sd,)"
  jq -e '.search.end | endswith("nothing else differs with it pinned")' <<<"$STDOUT" >/dev/null ||
    fail "$mode: one plant's search.end $(jq -r .search.end <<<"$STDOUT")"

  run_dtrace 0 bisect two-a two-b --step 0 --rank 0 --first "${flags[@]}"
  STDOUT=$(cat "$OUT")
  [ "$(culprits "$STDOUT")" = "$first" ] || fail "$mode: --first named $(culprits "$STDOUT" | paste -sd,)"
  [ "$(jq -r .search.stop <<<"$STDOUT")" = first ] || fail "$mode: --first ended with $(jq -c .search <<<"$STDOUT")"
done

# The text report lists both, the second with what was pinned.
run_dtrace 0 bisect two-a two-b --step 0 --rank 0 --trust
STDOUT=$(cat "$OUT")
grep -q "^culprits (2, in the order found; each with the ones before it pinned):" <<<"$STDOUT" ||
  fail "the text report lists no culprits: $STDOUT"
grep -q "^  2\. $second" <<<"$STDOUT" || fail "the text report's second culprit is not $second: $STDOUT"
grep -q "^  pinned:   $first\$" <<<"$STDOUT" || fail "the text report does not say what was pinned: $STDOUT"
# --max-culprits 1: one, and the reason.
run_dtrace 0 bisect two-a two-b --step 0 --rank 0 --trust --json --max-culprits 1
STDOUT=$(cat "$OUT")
[ "$(jq -r .search.stop <<<"$STDOUT")" = max-culprits ] || fail "--max-culprits 1 ended with $(jq -c .search <<<"$STDOUT")"
echo "ok: $workload: both plants named in one bisect, sessions and launches"
