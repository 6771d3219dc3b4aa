#!/usr/bin/env bash
# A choice made once per process (minitrain's autotune switch with its chaos
# unpinned: each process, replays included, picks the lm-head configuration
# on its own) is named even when a layer-pass attempt's replays make the same
# choice (issue 12): replays that reproduce one run's records while the runs
# differ make bisect start more, until two differ (in fresh processes: with
# replay sessions, fresh sessions per attempt). Four bisects here, and more
# until one has met an attempt whose replays agree (about half do) and counted
# outcomes, whose numbers are checked: at most 16 (a chance of 1 in 65,536 of
# meeting none); tools/bench/per_process.sh measures 20 of 20 at 1 and 4 ranks.
. "$(dirname "$0")/bisect-lib.sh"
op=$(planted autotune op)
scope=$(planted autotune scope)
mt --steps 2 --level step --nondet autotune --out a
# Unpinned, B picks like A half the time: record B until the runs differ.
for try in $(seq 1 30); do
  rm -rf b
  mt --steps 2 --level step --nondet autotune --out b
  code=0
  "$DTRACE" diff a b >/dev/null 2>&1 || code=$?
  [ "$code" = 1 ] && break
done
[ "$code" = 1 ] || fail "30 unpinned autotune runs all picked like run a"
extended=0
bisects=0
while [ "$bisects" -lt 4 ] || { [ "$extended" = 0 ] && [ "$bisects" -lt 16 ]; }; do
  bisects=$((bisects + 1))
  run_dtrace 0 bisect --trust --json a b
  json_is verdict '"named"'
  json_is culprit.op "\"$op\""
  json_is culprit.scope "\"$scope\""
  json_is step 0
  # When the first attempt's replays agreed, the search went on and counted.
  if python3 -c 'import json,sys; sys.exit(0 if json.load(open(sys.argv[1]))["outcomes"] else 1)' "$OUT"; then
    extended=$((extended + 1))
    json_true 'd["outcomes"]["budget"] == 8 and d["outcomes"]["attempts"] >= 2'
    json_true 'd["outcomes"]["like_a"] + d["outcomes"]["like_b"] + d["outcomes"]["neither"] == d["outcomes"]["replays"]'
    json_true 'd["outcomes"]["replays"] == 2 * d["outcomes"]["attempts"]'
    json_true 'd["outcomes"]["like_a"] >= 1 and d["outcomes"]["like_b"] >= 1 and d["outcomes"]["neither"] == 0'
    # A session makes its process's choice once: each attempt after the first
    # ran in fresh sessions (a launch per side per attempt), and the report says so.
    if [ "${E2E_REPLAYS:-}" != launches ]; then
      json_true 'len(d["launches"]) == 2 * d["outcomes"]["attempts"] and all(l["session"] for l in d["launches"])'
      json_true 'all(l["why"] for l in d["launches"][2:]) and not any(l["why"] for l in d["launches"][:2])'
      json_true 'any("fresh sessions" in n for n in d["notes"])'
    fi
  fi
done
[ "$extended" -gt 0 ] || fail "none of $bisects bisects met replays that agreed: the outcome counts went unchecked"
echo "ok ($extended of $bisects bisects needed more than one attempt)"
