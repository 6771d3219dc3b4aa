#!/bin/bash
# Runs whose end records carry chains (minitrain's, recorded by libdtrace) are
# diffed by search; --stream reads everything and gives the same answer;
# --steps looks at a window, on diff and on show.
. "$(dirname "$0")/lib.sh"
A=$TESTDATA/minitrain/splitk-a
B=$TESTDATA/minitrain/splitk-b

# same_as_stream SEARCHED STREAMED: two diff --json documents identical but
# for what dtrace(1) says differs: the search's note and compared.records
# (the records of the steps read).
same_as_stream() {
  python3 - "$1" "$2" <<'PY'
import json, sys
def comparable(path):
    d = json.load(open(path))
    d["notes"] = [n for n in d["notes"] if not n.startswith("searched by chained")]
    d["compared"].pop("records")
    return d
sys.exit(comparable(sys.argv[1]) != comparable(sys.argv[2]))
PY
}

run_dtrace 1 diff --json "$A" "$B"
json_is first.step 0
json_is first.seq 76
json_is first.role '"origin"'
# FILE:LINE, as the streaming diff names it (the end records' line numbers).
json_true "d['first']['a_location'].endswith('rank0.jsonl:78')"
json_true 'any(n.startswith("searched by chained step digests") for n in d["notes"])'
cp "$OUT" search.json

run_dtrace 1 diff --stream --json "$A" "$B"
json_is first.step 0
json_is first.seq 76
json_true 'd["first"]["a_location"].endswith("rank0.jsonl:78")'
json_true 'not any("chain" in n for n in d["notes"])'
json_is compared.records 340
same_as_stream search.json "$OUT" || fail "search and stream reports differ"

# A window after the divergence: rank 0 already differs before it, so the
# window is read in full, and the note says why.
run_dtrace 1 diff --json --steps 1-1 "$A" "$B"
json_is first.step 1
json_is compared.steps '[1, 1]'
json_true 'any("differs before the window" in n for n in d["notes"])'
run_dtrace 0 diff --json --steps 1- "$TESTDATA/minitrain/same-a" "$TESTDATA/minitrain/same-b"
json_is compared.steps '[1, 2]'
json_is verdict '"identical"'
run_dtrace 2 diff --steps 3-1 "$A" "$B"
run_dtrace 2 diff --steps x "$A" "$B"

run_dtrace 0 show --json --steps 1-2 --rank 1 "$TESTDATA/minitrain/same-a"
json_is selection.steps '[1, 2]'
json_true 'sorted({s["step"] for s in d["selected"]}) == [1, 2]'

# A run that crashed in its last step (rank 1 mid-line, rank 0 after step 1):
# the search cannot answer alone, so each rank is read from where its chains
# stop agreeing, and the report is --stream's (the cut line, the steps only A
# holds), with a note saying so.
mkdir crashed
head -n 153 "$TESTDATA/minitrain/same-b/rank1.jsonl" > crashed/rank1.jsonl
sed -n 154p "$TESTDATA/minitrain/same-b/rank1.jsonl" | head -c 40 >> crashed/rank1.jsonl
head -n 153 "$TESTDATA/minitrain/same-b/rank0.jsonl" > crashed/rank0.jsonl
run_dtrace 0 diff --json "$TESTDATA/minitrain/same-a" crashed
json_true 'any("then read record by record from where each rank" in n and "2 ranks known equal" in n for n in d["notes"])'
json_true 'any("last line cut short" in n for n in d["notes"])'
json_true 'any(n.startswith("steps 2 only in run A") or "2 only in run A" in n for n in d["notes"])'
cp "$OUT" crashed.json
run_dtrace 0 diff --stream --json "$TESTDATA/minitrain/same-a" crashed
same_as_stream crashed.json "$OUT" || fail "a crashed run's searched diff differs from --stream"

# An older recorder's chained log, without line numbers in its end records
# nor a header declaring each file's rank: read in full, with a note, and the
# answer --stream gives.
OLD=$TESTDATA/search-old-no-line
run_dtrace 1 diff --json "$OLD/a" "$OLD/b"
json_true 'any("its header does not declare that it holds one rank" in n for n in d["notes"])'
json_true 'd["first"]["a_location"].endswith("rank0.jsonl:78")'
cp "$OUT" old.json
run_dtrace 1 diff --stream --json "$OLD/a" "$OLD/b"
python3 - old.json "$OUT" <<'PY' || fail "an old log's diff differs from --stream"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
a["notes"] = [n for n in a["notes"] if not n.startswith("chained digests not searched")]
sys.exit(a != b)
PY
echo ok
