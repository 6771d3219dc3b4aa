#!/bin/bash
# A record present in B only (rank 1, step 2, an extra gelu output) is a structure mismatch; no inputs recorded: role unknown.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff/extra_record

run_dtrace 1 diff --json "$D/a" "$D/b"
json_is first.step 2
json_is first.rank 1
json_is first.op '"gelu"'
json_is first.name '"h"'
json_is first.kind '"structure"'
json_is first.role '"unknown"'
json_is first.a null
json_is first.b.hash '"bad0000000000e11"'
json_true 'd["first"]["b_location"].endswith("/b/rank1.jsonl:16")'
json_true '"B only" in d["first"]["detail"]'
