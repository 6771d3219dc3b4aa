#!/bin/bash
# A scalar one unit in the last place apart (f32 loss 40180000 vs 40180001): a value mismatch of 1 ulp, role unknown.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/ulp_one

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is verdict '"diverged"'
json_is first.step 1
json_is first.rank 1
json_is first.seq 4
json_is first.scope '"step"'
json_is first.op '"loss"'
json_is first.io '"metric"'
json_is first.name '"loss"'
json_is first.kind '"value"'
json_is first.role '"unknown"'
json_is first.ulp 1
json_is first.a.bits '"40180000"'
json_is first.b.bits '"40180001"'
json_is first.a.dtype '"f32"'
json_true 'd["first"]["a_location"].endswith("/a/rank1.jsonl:12")'
json_true 'd["first"]["b_location"].endswith("/b/rank1.jsonl:12")'
json_is 'ranks' "[$(python3 -c 'import json,sys; print(json.dumps(json.load(open(sys.argv[1]))["first"]))' "$OUT")]"
json_is compared.steps '[0, 2]'

run_dtrace 1 diff "$D/a" "$D/b"
out_has "diverged at step 1, rank 1"
out_has "bits 40180000 in A, 40180001 in B, 1 ulp"
