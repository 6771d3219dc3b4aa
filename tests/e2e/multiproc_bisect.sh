#!/usr/bin/env bash
# A job of three processes started by its own launcher (multiproc/launch.sh, a
# plain script that knows nothing of dtrace), each rank speaking
# dtrace-replay/1.1 by itself (multiproc/worker.py): the runs' headers record
# the launcher line as replay.argv, and `dtrace bisect --trust` replays through
# it, reads every rank's records and captures together, and names the op
# planted on rank 2 (fwd/layer.1 add). Nothing is left in TMPDIR, not even the
# launcher's shared directory.
. "$(dirname "$0")/lib.sh"
MP=$SOURCE_ROOT/tests/e2e/multiproc

"$MP/launch.sh" 3 python3 "$MP/worker.py" --steps 2 --out a --planted 2 || fail "run a"
"$MP/launch.sh" 3 python3 "$MP/worker.py" --steps 2 --out b --planted 2 || fail "run b"
ls a/rank0.jsonl a/rank1.jsonl a/rank2.jsonl >/dev/null || fail "a rank file is missing"
json_launcher=$(python3 -c 'import json,sys; print(json.loads(open("a/rank1.jsonl").readline())["replay"]["argv"][0])')
case "$json_launcher" in */launch.sh) ;; *) fail "replay.argv does not start with the launcher: $json_launcher" ;; esac
run_dtrace 1 diff a b

tmp=$WORK/tmp
mkdir -p "$tmp"
TMPDIR=$tmp run_dtrace 0 bisect --trust --json --timeout 60 a b
json_is verdict '"named"'
json_is culprit.rank 2
json_is culprit.scope '"fwd/layer.1"'
json_is culprit.op '"add"'
json_is ranks_replayed '[0, 1, 2]'
json_true 'd["evidence"]["distinct_outputs"] >= 2'
json_true 'all(r["argv"][0].endswith("launch.sh") for r in d["replays"])'
[ -z "$(ls -A "$tmp")" ] || fail "left in TMPDIR: $(ls -A "$tmp")"

# --keep shows the layout: one directory per replay, a file per rank, and the
# ranks' capture indexes side by side.
TMPDIR=$tmp run_dtrace 0 bisect --trust --keep kept --timeout 60 a b
for r in 0 1 2; do
  [ -s "kept/layer-A-0/rank$r.jsonl" ] || fail "kept/layer-A-0/rank$r.jsonl missing"
  grep -q '^exit 0' "kept/layer-A-0/rank$r.status" || fail "rank $r's status is not exit 0"
  [ -s "kept/capture-A/capture.rank$r.jsonl" ] || fail "kept/capture-A/capture.rank$r.jsonl missing"
done
[ ! -e kept/layer-A-0/replay.jsonl ] || fail "a 1.1 workload wrote DTRACE_OUT"
echo ok
