#!/usr/bin/env bash
# dtrace watch on a 4,096-rank run keeps diff's memory bound (issue 14,
# dtrace(1) watch: "memory stays bounded as in diff ... however many ranks").
# make_run writes a reference and the same run with one record differing at
# the last step on the last rank (4,096 rank files each, 8 steps, 80 MB).
# `dtrace diff` of the two gives the bound, measured here on the same runs
# (with the byte stage unable to skip anything, see below):
# 32 MiB of read buffers per run and about a step per rank. Watch's peak RSS
# (getrusage, by /usr/bin/time) must stay within a quarter above it (twice it
# under the sanitizers):
# - on the finished run: a read floor of 16 KiB per rank file (the old one:
#   twice diff's 32 MiB per run; 185 MiB against a bound of 155) or steps kept
#   after they were compared (209 MiB) break it;
# - while watch_feed writes the run into an empty directory, lines cut in
#   4 KiB pieces;
# - with a limit of 1,024 open files for 8,192 rank files: watch reopens the
#   files beyond half the limit at each poll and says so, rather than fail.
# Watch needs one inotify instance and a watch per run directory, not one per
# rank file, whatever the number of ranks.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
: "${MAKE_RUN:?MAKE_RUN must name tools/bench/make_run}"
: "${WATCH_FEED:?WATCH_FEED must name tools/bench/watch_feed}"
[ -x /usr/bin/time ] || skip "no /usr/bin/time to read the peak RSS"
RANKS=4096
STEPS=8
LAST=$((STEPS - 1))
"$MAKE_RUN" ref --ranks $RANKS --steps $STEPS --layers 1 >/dev/null
"$MAKE_RUN" src --ranks $RANKS --steps $STEPS --layers 1 --diverge "$LAST:$((RANKS - 1)):5" >/dev/null

# rss_kb STATUS FILE ARG...: runs dtrace ARG... as run_dtrace does, its peak RSS
# (KiB) into FILE.
rss_kb() {
  local want=$1 file=$2
  shift 2
  local got=0
  /usr/bin/time -f '%M' -o "$file" "$DTRACE" "$@" >"$OUT" 2>"$ERR" || got=$?
  [ "$got" = "$want" ] || fail "dtrace $*: exit status $got, expected $want"
  tail -n1 "$file" >"$file.kb"  # after "Command exited with non-zero status"
  mv "$file.kb" "$file"
}

# diverged_at_last: watch's last event is the planted divergence.
diverged_at_last() {
  last_event "$OUT" >last.json
  jq -e --argjson step $LAST --argjson rank $((RANKS - 1)) \
    '.event == "diverged" and .diff.first.step == $step and .diff.first.rank == $rank and .diff.first.seq == 5' \
    last.json >/dev/null || fail "$1: not the planted divergence: $(head -c 600 last.json)"
}

within_bound() {  # WHAT RSS_FILE
  local rss
  rss=$(cat "$2")
  echo "$1: peak RSS $((rss / 1024)) MiB (diff: $((diff_rss / 1024)) MiB, bound $((bound / 1024)) MiB)"
  [ "$rss" -le "$bound" ] || fail "$1: peak RSS $((rss / 1024)) MiB above diff's bound $((bound / 1024)) MiB"
}

. "$HERE/watch-lib.sh"
# Under the sanitizers (tools/test.sh's second build) freed memory waits in
# ASan's quarantine (256 MiB by default) before it is reused: a small one for
# both commands; redzones and shadow grow with each allocation, in a way not
# measured here, so there the bound is twice diff's (gross growth only; the
# plain build holds the tight one).
quarter=4
if ldd "$DTRACE" | grep libasan >/dev/null; then
  export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}quarantine_size_mb=16"
  quarter=1
fi
# The bound is the streaming reader's: diff's byte stage (dtrace(1)) would
# skip the rank files both runs wrote alike and read almost nothing here, so
# diff reads a copy of the reference whose record lines carry a space after
# their opening brace: the same records, no byte in common after the headers.
mkdir ref-spaced
for f in ref/*.jsonl; do sed '2,$ s/^{/{ /' "$f" >"ref-spaced/${f#ref/}"; done
rss_kb 1 diff.rss diff --stream src ref-spaced --json
jq -e --argjson step $LAST '.first.step == $step' "$OUT" >/dev/null ||
  fail "diff of the spaced reference: not the planted divergence: $(head -c 600 "$OUT")"
diff_rss=$(cat diff.rss)
bound=$((diff_rss + diff_rss / quarter))

rss_kb 1 watch.rss watch src --against ref --idle 0.5 --json
diverged_at_last "finished run"
within_bound "watch, finished run" watch.rss

# While a writer appends (the reference finished, as a supervisor would have it).
"$WATCH_FEED" src run --rate 200 --piece 4096 >feed.json &
feed=$!
rss_kb 1 live.rss watch run --against ref --idle 2 --json
wait "$feed" || fail "watch_feed failed"
events_valid "$OUT"
diverged_at_last "live run"
within_bound "watch, while written" live.rss

# More rank files than the descriptors: reopened at each poll, and said.
(
  ulimit -n 1024
  rss_kb 1 fd.rss watch src --against ref --idle 0.5 --json
) || exit 1
diverged_at_last "ulimit -n 1024"
jq -e '[.diff.notes[] | select(test("descriptors .* reopened at each poll"))] | length == 2' last.json >/dev/null ||
  fail "ulimit -n 1024: no note of the reopened files: $(jq -c .diff.notes last.json)"
within_bound "watch, ulimit -n 1024" fd.rss
echo "ok"
