#!/usr/bin/env bash
# `dtrace bisect` without runs takes the runs, step and rank of the last
# `dtrace diff` in this directory (./.dtrace/) and says so on stderr (naming
# runs under this directory relative to it), with one
# progress line per stage (restore check included) and per replay; a diff that
# failed leaves no state, so bisect never falls back on an older diff's runs.
. "$(dirname "$0")/bisect-lib.sh"
mt --steps 2 --nondet splitk --chaos-seed 1 --out a
mt --steps 2 --nondet splitk --chaos-seed 2 --out b
run_dtrace 1 diff a b
[ -f .dtrace/last-diff.json ] || fail "diff kept no state in .dtrace/"
run_dtrace 0 bisect --trust
# Runs inside this directory are named as the diff was given them, relative.
err_has "using the last diff (.dtrace/): A a, B b, step 0"
out_has "A: a"
err_has "[restore] the replays of A and B start step 0 from the state each run recorded there"
err_has "[layer] suspect layer: $(planted splitk scope)"
err_has "[kernel] suspect kernel: $(planted splitk scope) $(planted splitk op)"
err_has "[confirm] replayed B in "
out_has "  numbers:  "

run_dtrace 2 diff a no-such-run
[ ! -e .dtrace/last-diff.json ] || fail "a failed diff left the older diff's state"
run_dtrace 2 bisect --trust
trouble_is "no runs given and no earlier \`dtrace diff\` in this directory"
echo ok
