#!/bin/bash
# A file whose header declares one rank (field `rank`, dtrace-fp(5)) is held to
# it: diff's search skips such a file's vouched steps unread, so a line of
# another rank, a step out of order or a line after its step's end record in it
# is an error naming the file and line, in diff (streamed or searched), check
# and watch alike, never a line silently left out. The same lines in an undeclared file
# are a valid log. A malformed declaration is a malformed header.
. "$(dirname "$0")/lib.sh"

header() {  # header RANK|-: a two-rank run's header, declaring RANK or nothing
  local rank=
  [ "$1" = - ] || rank=",\"rank\":$1"
  printf '{"dtrace":"fp/1","run":"r","world_size":2,"hash":"xxh3-64k/1","level":"step"%s}\n' "$rank"
}
step() {  # step S RANK HASH: one record and its end record
  printf '{"step":%s,"rank":%s,"seq":0,"scope":"step","op":"loss","io":"metric","name":"loss","dtype":"f32","bits":"%s"}\n' "$1" "$2" "$3"
  printf '{"step":%s,"rank":%s,"end":true,"count":1}\n' "$1" "$2"
}
ref() {  # a valid run: ranks 0 and 1 in their own declared files, steps 0-2
  mkdir -p "$1"
  { header 0; step 0 0 3f800000; step 1 0 3f800000; step 2 0 3f800000; } >"$1/rank0.jsonl"
  { header 1; step 0 1 3f800000; step 1 1 3f800000; step 2 1 3f800000; } >"$1/rank1.jsonl"
}
ref A

# Rank 1's step 1 written inside rank0.jsonl, whose header declares rank 0.
ref stray
{ header 0; step 0 0 3f800000; step 1 1 40000000; step 1 0 3f800000; step 2 0 3f800000; } >stray/rank0.jsonl
{ header 1; step 0 1 3f800000; step 2 1 3f800000; } >stray/rank1.jsonl
for mode in "" --stream; do
  run_dtrace 2 diff $mode A stray
  trouble_is "stray/rank0.jsonl:4: rank 1 in a file whose header declares rank 0 alone"
done
run_dtrace 2 check stray
trouble_is "stray/rank0.jsonl:4: rank 1 in a file whose header declares rank 0 alone"
# watch follows the same files by the same rule (log::DeclaredRank).
run_dtrace 2 watch stray --against A --idle 1
trouble_is "stray/rank0.jsonl:4: rank 1 in a file whose header declares rank 0 alone"

# The same layout undeclared is a valid log: rank 1 diverged at step 1.
sed -i '1s/,"rank":0//' stray/rank0.jsonl
for mode in "" --stream; do
  run_dtrace 1 diff $mode --json A stray
  json_is first.rank 1
  json_is first.step 1
done

# Steps out of order in a declared file.
ref order
{ header 0; step 0 0 3f800000; step 2 0 3f800000; step 1 0 3f800000; } >order/rank0.jsonl
run_dtrace 2 diff A order
trouble_is "order/rank0.jsonl:6: step 1 after step 2 in a file whose header declares rank 0 alone, in step order"
run_dtrace 2 check order
trouble_is "order/rank0.jsonl:6: step 1 after step 2"
run_dtrace 2 watch order --against A --idle 1
trouble_is "order/rank0.jsonl:6: step 1 after step 2 in a file whose header declares rank 0 alone, in step order"

# A record after its step's end record in a declared file.
ref late
{ header 0; step 0 0 3f800000; step 1 0 3f800000
  printf '{"step":1,"rank":0,"seq":1,"scope":"step","op":"lr","io":"metric","name":"lr","dtype":"f32","bits":"3f800000"}\n'
  step 2 0 3f800000; } >late/rank0.jsonl
run_dtrace 2 diff --stream A late
trouble_is "late/rank0.jsonl:6: step 1 after its end record in a file whose header declares rank 0 alone"

# A declaration that is not a rank of the run.
ref bad
sed -i '1s/"rank":1/"rank":2/' bad/rank1.jsonl
run_dtrace 2 diff A bad
trouble_is "bad/rank1.jsonl:1: header field 'rank' must be an integer from 0 to world_size - 1"
echo ok
