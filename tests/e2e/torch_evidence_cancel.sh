#!/usr/bin/env bash
# The evidence reading of a sum whose terms cancel (issue 28, point 6): a custom
# op (tests/e2e/torch_cancel.py) sums [h, -h, 1e-6] per row in a random order,
# so its result is about 1e-6 of its terms and two orders differ by roundings of
# the terms, most of the result itself. bisect names the op and reads the
# difference against what was summed, the op's captured inputs: a reduction
# order, not memory nothing wrote; the JSON says which magnitude it used.
. "$(dirname "$0")/torch-lib.sh"
cancel() {
  "$PYTHON" "$SOURCE_ROOT/tests/e2e/torch_cancel.py" "$@" >/dev/null 2>"$WORK/example.err" ||
    { cat "$WORK/example.err" >&2; fail "torch_cancel.py $*"; }
}
cancel --run-dir a --checkpoint-dir ca
cancel --run-dir b --checkpoint-dir cb
run_dtrace 1 diff --json a b
json_is first.step 0
run_dtrace 0 bisect --trust --timeout 600 --json a b
json_is verdict '"named"'
json_is culprit.op '"dtrace_test.row_sum.default"'
json_is culprit.scope '"fwd/cancel"'
json_true 'd["evidence"]["distinct_outputs"] >= 2'
json_is evidence.magnitude '"inputs"'
# What the op summed is some 1e6 times larger than what it returned.
json_true 'd["evidence"]["input_magnitude"] > 1e4 * d["evidence"]["output_magnitude"]'
json_true '"reduction order" in d["evidence"]["reading"]'
json_true '"nothing wrote" not in d["evidence"]["reading"]'
json_true '"the op'"'"'s inputs'"'"' largest value" in d["evidence"]["reading"]'
echo ok
