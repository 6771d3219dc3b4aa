#!/usr/bin/env bash
# dtrace replicas on a PyTorch job (docs/torch.md, "Replicas"): the example's
# ranks (gloo, started as torchrun starts them) are data-parallel replicas, and
# dtrace_torch writes their replica groups into the header (dtrace-fp(5)
# "replicas") through the C API's replica_groups, so `dtrace replicas RUN` needs
# no --groups. A bit flipped in one rank's parameters (--flip-bit RANK:STEP) is
# named at its rank and step with three ranks; with two, the step is named but
# no majority names the rank. A DistributedDataParallel model gives the groups
# without the program naming them; one process writes none; bad groups are a
# RecorderError naming them.
. "$(dirname "$0")/torch-lib.sh"

# launch RANKS DIR ARGS...: the example on RANKS local gloo ranks.
launch() {
  local ranks=$1 dir=$2 port=$(free_port) pids=() k
  shift 2
  for ((k = 0; k < ranks; k++)); do
    RANK=$k LOCAL_RANK=$k WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
      "$PYTHON" "$EXAMPLE" --run-dir "$dir" "$@" >/dev/null 2>"$WORK/rank$k.err" &
    pids+=($!)
  done
  for ((k = 0; k < ranks; k++)); do
    wait "${pids[$k]}" || { cat "$WORK/rank$k.err" >&2; fail "rank $k of $dir"; }
  done
}
groups_are() {  # groups_are DIR JSON: rank 0's header replicas.groups
  local got
  got=$(head -n1 "$1/rank0.jsonl" | "$PYTHON" -c 'import json,sys; print(json.dumps(json.load(sys.stdin).get("replicas", {}).get("groups")))')
  [ "$got" = "$2" ] || fail "$1: header replicas.groups $got, expected $2"
}

launch 3 sdc --steps 4 --flip-bit 1:2
groups_are sdc '[[0, 1, 2]]'
run_dtrace 1 replicas sdc --json
json_is groups_from '"header"'
json_is verdict '"departed"'
json_is first.step 2
json_is first.departing '[1]'
json_is first.majority true
json_is first.op '"param"'
json_is first.io '"state"'
run_dtrace 1 replicas sdc
out_has "group 0 (ranks 0-2) departs at step 2: rank 1 departed from the majority"

launch 2 pair --steps 3 --flip-bit 0:1
groups_are pair '[[0, 1]]'
run_dtrace 1 replicas pair --json
json_is first.step 1
json_is first.majority false

launch 3 ddp --steps 3 --ddp
groups_are ddp '[[0, 1, 2]]'
run_dtrace 0 replicas ddp --json
json_is verdict '"agree"'

ex --steps 1 --run-dir alone
groups_are alone null

# Given explicitly: a list, the string grammar, and values libdtrace refuses.
"$PYTHON" - <<'PY' >"$OUT" 2>"$ERR" || fail "explicit replicas: $(cat "$ERR")"
import json, torch, dtrace_torch as dt
from dtrace_torch.errors import RecorderError

def header(run, **kw):
    rec = dt.Recorder(torch.nn.Linear(2, 2), run_dir=run, rank=0, world_size=4, **kw)
    rec.close()
    with open(run + "/rank0.jsonl") as f:
        return json.loads(f.readline()).get("replicas")

assert header("lists", replicas=[[0, 2], [1, 3]]) == {"groups": [[0, 2], [1, 3]], "per_rank": ["rng"]}
assert header("text", replicas="0-3", per_rank=["rng", "sampler"])["per_rank"] == ["rng", "sampler"]
assert header("none", replicas=[]) is None
for bad, says in (("0-5", "larger than world_size 4"), ([[0, 1], [1, 2]], "options.replica_groups"),
                  ([[0]], "2 ranks or more")):
    try:
        header("bad", replicas=bad)
    except RecorderError as e:
        assert says in str(e), str(e)
    else:
        raise AssertionError(f"replicas={bad!r} accepted")
for bad, error in (([[0, 1.0]], TypeError), ):
    try:
        header("bad", replicas=bad)
    except error:
        pass
    else:
        raise AssertionError(f"replicas={bad!r} accepted")
print("explicit ok")
PY
out_has "explicit ok"
echo ok
