#!/bin/bash
# What a reader of the HTML report sees first (issue 28, point 7), in headless
# Chromium at 1400x1000 (browser-lib.sh's reads_well): the title names what was
# found -- bisect's verdict, scope, op and rank, diff's step and rank -- on the
# first screen; every replay command can be read in full; the map of a run of
# one rank draws its rank label once, not two labels over each other, nor the
# ulp histogram of a read of memory nothing wrote its labels; and no count
# reads "1 ranks". A run of one rank is where all of these went wrong.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bisect-lib.sh"
. "$here/browser-lib.sh"

mt --steps 2 --level layer --nondet splitk --chaos-seed 1 --out a
mt --steps 2 --level layer --nondet splitk --chaos-seed 2 --out b
run_dtrace 1 diff --json a b
step=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["first"]["step"])' "$OUT")
run_dtrace 1 diff --html diff.html a b
reads_well "$WORK/diff.html" "diverged" "step $step" "rank 0"

run_dtrace 0 bisect --trust --json --html bisect.html a b
json_is verdict '"named"'
scope=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["culprit"]["scope"])' "$OUT")
op=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["culprit"]["op"])' "$OUT")
reads_well "$WORK/bisect.html" "named" "$scope" "$op" "step $step" "rank 0"
# The text report, too, counts one rank as one.
run_dtrace 0 bisect --trust a b
out_has "step $step, rank 0 (replays ran rank 0)"
# A read of memory nothing wrote: ulp distances up to 2^31, whose histogram
# labels (2097152 ... 2147483648) do not fit beside each other as digits.
mt --steps 2 --nondet uninit-pad --chaos-seed 1 --out ua
mt --steps 2 --nondet uninit-pad --chaos-seed 2 --out ub
run_dtrace 0 bisect --trust --json --html uninit.html ua ub
json_true 'd["evidence"]["max_ulp"] > 2 ** 24'
reads_well "$WORK/uninit.html" named
# The page still loads clean with everything on it.
dump_dom "$WORK/bisect.html"
page_clean
self_contained bisect.html
echo ok
