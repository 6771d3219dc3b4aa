#!/usr/bin/env bash
# dtrace tax times minitrain's deterministic and fast kernels (DTRACE_DETERMINISTIC),
# arms interleaved, and reports both modes; the deterministic arms agree, the
# fast ones (unordered split-K and bias gradients) do not.
. "$(dirname "$0")/minitrain-lib.sh"
expect_status 0 "$DTRACE" tax --arms 2 --json --keep kept -- "$MINITRAIN" --steps 3 --out mine
for mode in deterministic fast; do
  jq -e --arg m "$mode" '.[$m].median_s > 0 and .[$m].p25_s <= .[$m].median_s and .[$m].median_s <= .[$m].p75_s
    and .[$m].steps == 4 and (.[$m].arm_medians_s | length) == 2' out.txt >/dev/null ||
    fail "$mode: $(jq -c ".[\"$mode\"]" out.txt)"
done
jq -e '(.overhead_percent | type) == "number" and (.within_noise | type) == "boolean"' out.txt >/dev/null || fail "overhead"
jq -e '.deterministic_identical == true and .fast_identical == false' out.txt >/dev/null ||
  fail "identical: $(jq -c '{deterministic_identical, fast_identical}' out.txt)"
[ "$(jq -r '[.arms[].label] | join(" ")' out.txt)" = "deterministic.1 fast.1 fast.2 deterministic.2" ] ||
  fail "arm order: $(jq -c '[.arms[].label]' out.txt)"
# The fast arms say so in their header, and a replay of them would use the same kernels.
[ "$(head -n1 kept/fast.1/rank0.jsonl | jq .config.fast_kernels)" = true ] || fail "fast_kernels not in config"
replay_argv kept/fast.1 | grep -x -- --fast-kernels >/dev/null || fail "replay argv lacks --fast-kernels"
[ "$(head -n1 kept/deterministic.1/rank0.jsonl | jq .config.fast_kernels)" = null ] || fail "deterministic arm fast"

expect_status 0 "$DTRACE" tax --arms 1 -- "$MINITRAIN" --steps 3 --out mine
grep -q "^determinism tax: [+-][0-9.]*%" out.txt || fail "text: $(cat out.txt)"
grep -q "^  deterministic  median" out.txt && grep -q "^  fast           median" out.txt || fail "modes: $(cat out.txt)"
echo ok
