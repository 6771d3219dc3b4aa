#!/usr/bin/env bash
# A replay is evidence only when it starts where the run started (dtrace(1),
# restore check): every step replay after a side's first is held by value to
# the state its run recorded at the step. minitrain's --replay-fault plants
# replays that do not start there, after a first replay that does (so the
# restore check itself passes): bisect stops with exit 2 naming the stage, the
# request or launch and the state record, and names no kernel. The same runs
# without the fault name the kernel, so it is the fault that stops it.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bisect-lib.sh"

# runs FAULT: runs a and b with splitk planted (pinned to differ) and FAULT.
runs() {
  rm -rf a b
  mt --steps 2 --level step --nondet splitk --chaos-seed 1 --out a ${1:+--replay-fault "$1"}
  mt --steps 2 --level step --nondet splitk --chaos-seed 2 --out b ${1:+--replay-fault "$1"}
  run_dtrace 1 diff a b
}
# refused MODE PATTERN: bisect (with MODE's way of replaying) exits 2 with no
# report, its error matching PATTERN (grep -E), and no kernel named.
refused() {
  run_dtrace 2 bisect --trust --json $1
  [ ! -s "$OUT" ] || fail "$1: a report was printed: $(head -c 300 "$OUT")"
  grep "^dtrace: error: " "$ERR" | grep -E -- "$2" >/dev/null ||
    fail "$1: the error does not match: $2: $(cat "$ERR")"
}
record="step param [^ ]+ \(rank 0\) is [0-9a-f]{16} in this replay, [0-9a-f]{16} as run A recorded it"

runs ""
run_dtrace 0 bisect --trust --json
json_is verdict '"named"'

# A kernel-level step replay (the capture stage) restores one parameter bit
# otherwise than the layer pass's replay did: sessions and launches alike.
runs kernel-restore
refused "" "replay of run A \(capture\) in request 1 of its replay session \(step 0, level kernel, scope fwd/[^,]+, capture\): it did not start step 0 from the state the run started it from: $record\. The workload restores step 0 otherwise here than at request 0 of its replay session \(the layer stage's\), which the restore check held to the run"
refused --launches "replay of run A \(capture\): it did not start step 0 from the state the run started it from: $record\. The workload restores step 0 otherwise here than at its first replay \(the layer stage's\)"

# A session that carries state from one request into the next: its second
# step request starts where the first ended. Launches start afresh each time,
# so the same workload bisected with --launches names the kernel.
runs carry-state
refused "" "replay of run A \(capture\) in request 1 of its replay session \(step 0, level kernel, scope fwd/[^,]+, capture\): it did not start step 0 from the state the run started it from: $record"
run_dtrace 0 bisect --trust --json --launches
json_is verdict '"named"'

echo ok
