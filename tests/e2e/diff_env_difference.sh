#!/bin/bash
# Header differences (env NCCL_ALGO Ring vs Tree, config optim.lr) are reported and Tree is flagged; the records are identical.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/env_difference

run_dtrace 0 diff --json "$D/a" "$D/b"
identical_over 0 2 3 2 30
json_true '{"section": "env", "key": "NCCL_ALGO", "a": "Ring", "b": "Tree"} in d["header_differences"]'
json_true '{"section": "config", "key": "optim.lr", "a": 0.001, "b": 0.002} in d["header_differences"]'
json_true 'len(d["header_differences"]) == 2'
# Tree is not deterministic (dtrace(1), env): run B's value is flagged, run A's Ring is not.
json_true '[(f["run"], f["key"], f["value"]) for f in d["env_flags"]] == [("B", "NCCL_ALGO", "Tree")]'
json_true 'd["env_flags"][0]["reason"].startswith("NCCL_ALGO=Tree, whose reduction order is not fixed")'

run_dtrace 0 diff "$D/a" "$D/b"
out_has "env NCCL_ALGO: A Ring, B Tree"
out_has "config optim.lr: A 0.001, B 0.002"
out_has "warning: run B used NCCL_ALGO=Tree, whose reduction order is not fixed"
