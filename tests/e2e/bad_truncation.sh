#!/bin/bash
# A run cut by a crash, through the CLI: the last rank file cut at offsets
# spread over its last 4 KiB (every 37th byte and every line end +-1; the
# unit test bad_input_test.cpp takes every byte) gives exit 0 or 1 from
# `dtrace check` with the cut step named exactly, and `dtrace diff` against the
# whole run says identical: never a crash, never trouble.
. "$(dirname "$0")/lib.sh"
python3 - "$WORK/whole" <<'PY'
import os, sys
d = sys.argv[1]; os.makedirs(d)
for rank in range(2):
    with open(f"{d}/rank{rank}.jsonl", "w") as f:
        f.write('{"dtrace":"fp/1","run":"cut","world_size":2,"hash":"xxh3-64k/1","level":"layer"}\n')
        for step in range(30):
            for seq in range(5):
                f.write(f'{{"step":{step},"rank":{rank},"seq":{seq},"scope":"fwd/layer.{seq}/mlp",'
                        f'"op":"mlp","io":"out","name":"y","dtype":"bf16","shape":[4,8],'
                        f'"hash":"{step * 7919 + seq:016x}"}}\n')
            f.write(f'{{"step":{step},"rank":{rank},"end":true,"count":5}}\n')
PY
cp -r whole cut
full=$(stat -c %s whole/rank1.jsonl)
# One line per cut: SIZE, then "rank step" of each step begun and not ended.
python3 - whole/rank1.jsonl >cuts <<'PY'
import json, sys
data = open(sys.argv[1], "rb").read()
lo = len(data) - 4096
cuts = set(range(lo, len(data) + 1, 37))
for i, b in enumerate(data):
    if b == 10 and i >= lo:
        cuts.update({i - 1, i, i + 1})
for size in sorted(c for c in cuts if lo <= c <= len(data)):
    begun, ended = set(), set()
    for line in data[:size].split(b"\n")[1:]:
        try:
            r = json.loads(line)
        except ValueError:
            continue
        (ended if r.get("end") else begun).add(r["step"])
    print(size, " ".join(f"1 {s}" for s in sorted(begun - ended)))
PY
n=0
while read -r size want; do
  head -c "$size" whole/rank1.jsonl >cut/rank1.jsonl
  got=0
  "$DTRACE" check --json cut >"$OUT" 2>"$ERR" || got=$?
  [ "$got" = 0 ] || [ "$got" = 1 ] || fail "cut at $size of $full: check exit $got"
  named=$(jq -r '[.violations[] | select(.kind == "incomplete-step") | "\(.rank) \(.step)"] | join(" ")' "$OUT")
  [ "$named" = "$want" ] || fail "cut at $size of $full: check names incomplete [$named], expected [$want]"
  run_dtrace 0 diff whole cut
  n=$((n + 1))
done <cuts
[ "$n" -gt 100 ] || fail "only $n cuts"
echo "$n cuts"

# A file cut inside its header (the crash came before the first step): the
# file is ignored with a note, and check says its rank is absent.
head -c 40 whole/rank1.jsonl >cut/rank1.jsonl
run_dtrace 1 check --json cut
json_true '"cut/rank1.jsonl:1: header cut short (truncated by a crash?); file ignored" in d["notes"]'
json_true '[v["rank"] for v in d["violations"] if v["kind"] == "rank-absent"] == [1]'
run_dtrace 0 diff whole cut
out_has "rank 1 only in run A"
