#!/usr/bin/env bash
# Benchmark: the cost of recording in minitrain (issue 3's performance targets:
# step level at most 2% of step time, layer level at most 10%).
#
# Runs the default minitrain for STEPS steps at each level, REPEATS times, and
# reports what minitrain measures in the same run: mean step time and tokens/s
# with recording, the time spent recording (records handed over, fingerprints,
# end-of-step flushes), and step time and tokens/s without it. Run it on an idle
# machine: other load inflates step times and recording alike.
#
#   tools/bench/recording.sh [BUILD_DIR] [REPEATS]      (defaults: build-release, 3)
set -euo pipefail
build=${1:-build-release}
. "$(dirname "$0")/release.sh"
release_build "$build"
repeats=${2:-3}
steps=${STEPS:-60}
ranks=${RANKS:-1}
minitrain="$build/tools/minitrain/minitrain"
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-bench-recording.XXXXXX")
trap 'rm -rf "$work"' EXIT

printf '%-7s %-6s %10s %10s %12s %9s %12s %10s\n' level run "step ms" "tokens/s" "record ms" "record %" "bare ms" "bare tok/s"
for level in step layer kernel; do
  for ((i = 1; i <= repeats; i++)); do
    line=$("$minitrain" --steps "$steps" --ranks "$ranks" --level "$level" --out "$work/$level-$i" | grep ' level: ')
    # "minitrain: step level: step 29.10 ms, 4398 tokens/s; recording 0.650 ms (2.23%); without it 28.45 ms, 4499 tokens/s"
    read -r step_ms tokens record_ms record_pct bare_ms bare_tokens < <(
      sed -E 's/.*step ([0-9.]+) ms, ([0-9]+) tokens\/s; recording ([0-9.]+) ms \(([0-9.]+)%\); without it ([0-9.]+) ms, ([0-9]+) tokens\/s/\1 \2 \3 \4 \5 \6/' <<<"$line")
    printf '%-7s %-6s %10s %10s %12s %9s %12s %10s\n' "$level" "$i" "$step_ms" "$tokens" "$record_ms" "$record_pct" "$bare_ms" "$bare_tokens"
    rm -rf "$work/$level-$i"
  done
done
