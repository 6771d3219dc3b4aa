#!/usr/bin/env bash
# dtrace replicas (dtrace(1), replicas): minitrain's planted silent data
# corruption (--flip-bit RANK:STEP) is named at its step and rank, from the
# replica groups minitrain writes in its header; --groups regroups the ranks,
# a group of two that disagrees has no majority, and logs without the header
# field are read with --groups.
. "$(dirname "$0")/minitrain-lib.sh"
small=(--d-model 16 --layers 1 --heads 2 --seq 8 --batch 4)

mt "${small[@]}" --steps 6 --ranks 4 --out clean
head -n1 clean/rank0.jsonl | jq -e '.replicas.groups == [[0,1,2,3]] and .replicas.per_rank == ["rng","data"]' >/dev/null ||
  fail "minitrain's header lacks the replicas field"
expect_status 0 "$DTRACE" replicas clean
grep -q "^replicas agree: clean: 1 group (from header), steps 0-5 (6 steps)" out.txt || fail "clean: $(cat out.txt)"
expect_status 0 "$DTRACE" replicas clean --json
jq -e '.verdict == "agree" and .first == null and .compared.step_count == 6 and .compared.records > 0' out.txt >/dev/null ||
  fail "clean json: $(cat out.txt)"

mt "${small[@]}" --steps 6 --ranks 4 --flip-bit 2:3 --out sdc
expect_status 1 "$DTRACE" replicas sdc --json
jq -e '.verdict == "departed" and .first.step == 3 and .first.departing == [2] and .first.majority
       and .first.op == "param" and .first.io == "state" and .first.name == "embed.tok"
       and .first.variants[0].ranks == [0,1,3] and .first.variants[1].ranks == [2]' out.txt >/dev/null ||
  fail "sdc json: $(cat out.txt)"
# The departing record's file:line is the flipped rank's param record at step 3.
loc=$(jq -r '.first.variants[1].location' out.txt)
line=${loc##*:}
[ "${loc%:*}" = "sdc/rank2.jsonl" ] || fail "location $loc is not rank 2's file"
sed -n "${line}p" sdc/rank2.jsonl | jq -e '.step == 3 and .op == "param" and .name == "embed.tok"' >/dev/null ||
  fail "$loc is not the departing record"
expect_status 1 "$DTRACE" replicas sdc
grep -q "group 0 (ranks 0-3) departs at step 3: rank 2 departed from the majority" out.txt || fail "sdc text: $(cat out.txt)"
grep -q "departing rank 2: hash" out.txt || fail "sdc text lacks the departing value: $(cat out.txt)"
# Against the clean run, diff agrees on the step; it cannot tell the rank
# (every rank's all-reduced gradients differ at step 3 too), which is what
# the replica check adds: only rank 2's parameters departed.
expect_status 1 "$DTRACE" diff clean sdc --json
jq -e '.first.step == 3 and ([.ranks[] | select(.rank == 2 and .op == "param")] | length) == 1' out.txt >/dev/null ||
  fail "diff places the flip elsewhere: $(cat out.txt)"

# Regrouped: the pair holding rank 2 has no majority; the other pair agrees.
expect_status 1 "$DTRACE" replicas sdc --groups 0,2:1,3 --json
jq -e '.groups_from == "--groups" and (.departures | length) == 1 and .first.group == 0
       and .first.majority == false and .first.departing == [] and (.first.variants | length) == 2' out.txt >/dev/null ||
  fail "regrouped json: $(cat out.txt)"
expect_status 1 "$DTRACE" replicas sdc --groups 0,2:1,3
grep -q "no majority (2 values among 2 ranks): the departing rank cannot be named" out.txt || fail "no majority text: $(cat out.txt)"
expect_status 0 "$DTRACE" replicas sdc --groups 0,1,3

# Logs without the header field (recorded before it existed) need --groups:
# today's minitrain run with the field taken out of its headers.
mkdir old
for f in "$TESTDATA"/minitrain/same-a/rank*.jsonl; do
  sed '1s/"replicas":{[^}]*},//' "$f" >"old/${f##*/}"
done
! grep -q '"replicas"' old/rank*.jsonl || fail "the old-style copy still has a replicas field"
expect_status 2 "$DTRACE" replicas old
grep -q "no replica groups" err.txt || fail "missing groups: $(cat err.txt)"
expect_status 0 "$DTRACE" replicas old --groups 0-1

# Bad groups are trouble.
expect_status 2 "$DTRACE" replicas clean --groups 0-9
expect_status 2 "$DTRACE" replicas clean --groups 0,1:1,2
expect_status 2 "$DTRACE" replicas clean --groups 0:1,2
expect_status 2 "$DTRACE" replicas clean --groups 0,x
echo ok
