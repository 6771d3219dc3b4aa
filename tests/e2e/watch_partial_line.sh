#!/usr/bin/env bash
# dtrace watch (dtrace(1), watch) follows a run while it is written: rank files
# appear late, every line arrives in pieces, one record byte by byte. A line
# still being written is never read as truncated or malformed: the run ends
# identical to its reference, with inotify and with polling. A divergence is
# reported while the writer still runs; a malformed complete line is trouble
# naming file:line; a line cut short by a crash is noted only once the run has
# ended.
HERE=$(cd "$(dirname "$0")" && pwd)
. "$HERE/lib.sh"
. "$HERE/watch-lib.sh"
REF=$TESTDATA/minitrain/same-a
SRC=$TESTDATA/minitrain/same-b

# Pieces and a record byte by byte, both ways of noticing growth.
for mode in inotify poll; do
  rm -rf run writer.done
  extra=()
  [ "$mode" = poll ] && extra=(--no-inotify)
  python3 "$WRITER" "$SRC" run --bytewise 1:0 &
  writer=$!
  run_dtrace 0 watch run --against "$REF" --idle 1 --json "${extra[@]}"
  wait "$writer"
  events_valid "$OUT"
  last_event "$OUT" >last.json
  jq -e '.event == "ended" and .diff.verdict == "identical" and .diff.compared.steps == [0, 2]
         and .diff.compared.ranks == 2 and (.reason | test("nothing grew"))' last.json >/dev/null ||
    fail "$mode: not ended identical: $(cat last.json)"
  jq -e '[.diff.notes[] | select(test("cut short|malformed|incomplete"))] == []' last.json >/dev/null ||
    fail "$mode: a partial line was misread: $(cat last.json)"
  # The same bytes compared at rest, every record read (--stream: the runs carry
  # chained digests, which a diff would search), give the same records.
  records=$(jq .diff.compared.records last.json)
  run_dtrace 0 diff --stream run "$REF" --json
  json_is compared.records "$records"
done

# A divergence while the writer is still running (it pauses 20 s after it).
rm -rf run writer.done
python3 "$WRITER" "$SRC" run --flip 1:1 --pause 20 &
writer=$!
run_dtrace 1 watch run --against "$REF" --idle 30 --json
[ ! -e writer.done ] || fail "the divergence was reported only after the writer ended"
kill "$writer" 2>/dev/null || true
wait "$writer" 2>/dev/null || true
events_valid "$OUT"
last_event "$OUT" >last.json
jq -e '.event == "diverged" and .diff.verdict == "diverged" and .diff.first.step == 1 and .diff.first.rank == 1
       and .diff.first.io == "state" and (.diff.first.a_location | startswith("run/rank1.jsonl:"))
       and .reported_at >= .read_at' last.json >/dev/null || fail "divergence: $(cat last.json)"
echo "lag from reading the step to the report: $(jq '.reported_at - .read_at' last.json) s"

# The text report is diff's.
rm -rf run writer.done
python3 "$WRITER" "$SRC" run --flip 1:1 --delay 0
run_dtrace 1 watch run --against "$REF" --idle 1
out_has "diverged at step 1, rank 1"
out_has "watch: diverged"

# --keep-going: the first divergence, then each further rank as it diverges
# (rank 0 at step 2 is read after step 1 is reported: each side is read at
# most 2 steps ahead of the other),
# then the final report; exit 1.
rm -rf run writer.done
python3 "$WRITER" "$SRC" run --flip 1:1,2:0 --delay 0
run_dtrace 1 watch run --against "$REF" --idle 1 --keep-going --json
events_valid "$OUT"
jq -s -e '[.[] | select(.event != "progress") | .event] == ["diverged", "rank_diverged", "ended"]
          and (.[] | select(.event == "diverged") | .diff.first.rank == 1 and .diff.first.step == 1)
          and (.[] | select(.event == "rank_diverged") | .mismatch.rank == 0 and .mismatch.step == 2)
          and (.[] | select(.event == "ended") | .diff.verdict == "diverged" and (.diff.ranks | length) == 2)' "$OUT" >/dev/null ||
  fail "keep-going: $(cat "$OUT")"

# A malformed complete line is trouble with its file and line.
rm -rf run writer.done
python3 "$WRITER" "$SRC" run --garbage 0 --delay 0
run_dtrace 2 watch run --against "$REF" --idle 1
err_has "dtrace: error: run/rank0.jsonl:"

# A last line cut short, once the run has ended, is noted as diff notes it.
rm -rf run writer.done
python3 "$WRITER" "$SRC" run --cut 5 --delay 0
run_dtrace 0 watch run --against "$REF" --idle 1 --json
last_event "$OUT" >last.json
jq -e '.event == "ended" and ([.diff.notes[] | select(test("rank1.jsonl:[0-9]+: last line cut short"))] | length) == 1' last.json >/dev/null ||
  fail "cut short: $(cat last.json)"

# Neither a reference nor replica groups: nothing to compare.
run_dtrace 2 watch run
trouble_is "watch needs a reference"
echo ok
