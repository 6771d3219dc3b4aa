#!/usr/bin/env bash
# A divergence that shows up only in some replays is found within --repeat: a
# wrapper pins minitrain's chaos source for the first two replays (the first
# layer-pass attempt, which then agrees) and leaves it fresh afterwards.
. "$(dirname "$0")/bisect-lib.sh"
mt --steps 2 --nondet splitk --out a
mt --steps 2 --nondet splitk --out b
# Each launch claims the lowest free number with mkdir, which is atomic: bisect
# starts the two sides' launches together, and a read-then-write counter let
# both read 0 (then the second attempt was pinned too, and six layer replays ran).
cat >wrapper.sh <<'SH'
#!/bin/sh
n=1
while ! mkdir "$COUNTER/$n" 2>/dev/null; do n=$((n + 1)); done
if [ "$n" -le 2 ]; then exec "$MINITRAIN" "$@" --chaos-seed 7; fi
exec "$MINITRAIN" "$@"
SH
chmod +x wrapper.sh
export COUNTER=$WORK/counter
mkdir "$COUNTER"
run_dtrace 0 bisect --json --repeat 3 --replay "$WORK/wrapper.sh --steps 2 --nondet splitk --out unused" a b
json_is verdict '"named"'
json_is culprit.op "\"$(planted splitk op)\""
json_true 'any("attempt 1" in n for n in d["notes"])'
# The first culprit's layer pass: two attempts of two replays (the pinned rounds after it have their own).
json_true 'sum(1 for r in d["replays"][:d["culprits"][0]["replays"][1]] if r["stage"] == "layer") == 4'
# With one attempt only, the same wrapper never shows the divergence.
rm -rf "$COUNTER" && mkdir "$COUNTER"
run_dtrace 1 bisect --json --repeat 1 --replay "$WORK/wrapper.sh --steps 2 --nondet splitk --out unused" a b
json_is verdict '"not-reproduced"'
echo ok
