#!/usr/bin/env bash
# docs/torch.md's first example, as written (issue 39, proof): the first
# ```python block of docs/torch.md is examples/torch/train.py (the test fails
# when they part), a complete training script with no line of dtrace in it.
# Taken from the docs and run as the docs say, `dtrace record --out runs/a --
# python3 train.py` twice: each run is recorded, one step per optimizer step
# (train.py's 8, over a shuffled DataLoader's epochs), and the two diff
# identical; a run with another --seed differs from its first step.
. "$(dirname "$0")/record-torch-lib.sh"
DOC="$SOURCE_ROOT/docs/torch.md"
awk '/^```python$/ && !seen { inside = 1; seen = 1; next } inside && /^```$/ { exit } inside' "$DOC" >train.py
[ -s train.py ] || fail "docs/torch.md has no python block"
cmp -s train.py "$SOURCE_ROOT/examples/torch/train.py" ||
  { diff -u "$SOURCE_ROOT/examples/torch/train.py" train.py >&2; fail "docs/torch.md's example is not examples/torch/train.py"; }
grep -q dtrace train.py && fail "the docs' train.py names dtrace"

mkdir runs
record runs/a "$PYTHON" train.py
record runs/b "$PYTHON" train.py
grep -q "^step 7 loss" "$WORK/record-runs-a.out" || fail "train.py's output did not pass through dtrace record"
run_dtrace 0 diff --json runs/a runs/b
json_is verdict '"identical"'
json_is compared.step_count 8
run_dtrace 0 show --json runs/a
json_is ranks.0.step_count 8
record runs/c "$PYTHON" train.py --seed 1
run_dtrace 1 diff --json runs/a runs/c
json_is first.step 0
echo ok
