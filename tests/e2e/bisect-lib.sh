# Shared by the bisect end-to-end tests (sourced): lib.sh's assertions plus
# minitrain. Each test records two short runs at step level, as a user would,
# and checks what `dtrace diff` and `dtrace bisect --trust` say.
. "$(dirname "$0")/lib.sh"
: "${MINITRAIN:?MINITRAIN must name the minitrain binary}"

# mt ARGS...: minitrain, quiet on success.
mt() { "$MINITRAIN" "$@" >/dev/null 2>"$WORK/minitrain.err" || { cat "$WORK/minitrain.err" >&2; fail "minitrain $*"; }; }

# planted NAME FIELD: the ground truth minitrain plants for a switch.
planted() { "$MINITRAIN" --print-planted "$1" | python3 -c "import json,sys; print(json.load(sys.stdin)['$2'])"; }

# bisect_names SWITCH RANKS: two runs with the switch diverge, and bisect (with
# no arguments: the last diff's runs and step) names the planted kernel. The
# runs pin different chaos seeds (1 and 2 differ for every switch, autotune's
# start-up pick included), so whether they diverge is not left to chance; the
# replays inherit each run's seed through its replay argv.
bisect_names() {
  local switch=$1 ranks=$2 dir="$1-r$2"
  mkdir -p "$dir"
  mt --steps 2 --ranks "$ranks" --level step --nondet "$switch" --chaos-seed 1 --out "$dir/a"
  mt --steps 2 --ranks "$ranks" --level step --nondet "$switch" --chaos-seed 2 --out "$dir/b"
  run_dtrace 1 diff "$dir/a" "$dir/b"
  run_dtrace 0 bisect --trust --json
  json_is verdict '"named"'
  json_is culprit.op "\"$(planted "$switch" op)\""
  json_is culprit.scope "\"$(planted "$switch" scope)\""
  json_is culprit.role '"origin"'
  json_is culprit.step 0
  json_true 'd["evidence"]["distinct_outputs"] >= 2'
  json_true 'len(d["replays"]) >= 8 and all(r["exit"] == 0 for r in d["replays"])'
  # minitrain serves replay sessions: one launch per side (the first attempt's
  # replays diverge, the seeds are pinned); under E2E_REPLAYS=launches, one per replay.
  if [ "${E2E_REPLAYS:-}" = launches ]; then
    json_is replay_mode '"launches"'
    json_true 'len(d["launches"]) == len(d["replays"]) and not any(r["via"] == "request" for r in d["replays"])'
  else
    json_is replay_mode '"sessions"'
    json_true 'len(d["launches"]) == 2 and all(l["session"] for l in d["launches"])'
    json_true 'all(r["via"] == "request" for r in d["replays"])'
  fi
  err_has "[layer] replaying A"
}
