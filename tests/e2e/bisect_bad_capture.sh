#!/usr/bin/env bash
# A workload whose confirmation replays leave FIFOs (or links to /dev/zero)
# where their captured outputs belong: bisect still names the kernel, and says
# the confirmation failed, instead of blocking forever on a FIFO nothing writes.
. "$(dirname "$0")/bisect-lib.sh"
mt --steps 2 --level step --nondet splitk --chaos-seed 1 --out a
mt --steps 2 --level step --nondet splitk --chaos-seed 2 --out b
run_dtrace 1 diff a b

# replay.sh KIND: each side's own replay argv (the side is in the replay's
# directory name, DTRACE_OUT_DIR), then the confirmation's captures replaced by KIND.
for side in a b; do
  head -n1 "$side/rank0.jsonl" | jq -r '.replay.argv | @sh' >"argv-$side"
done
cat >replay.sh <<'SH'
#!/bin/sh
case "$(basename "$DTRACE_OUT_DIR")" in
  *-A*) eval "set -- $(cat "$WORK/argv-a")" ;;
  *) eval "set -- $(cat "$WORK/argv-b")" ;;
esac
"$@" || exit $?
case "$DTRACE_CAPTURE" in
  */confirm-*)
    for f in "$DTRACE_CAPTURE"/*.bin; do
      rm -f "$f"
      if [ "$KIND" = fifo ]; then mkfifo "$f"; else ln -s /dev/zero "$f"; fi
    done ;;
esac
SH
chmod +x replay.sh
export WORK

# --launches: the wrapper acts per launch (it names the side from DTRACE_OUT_DIR and
# spoils DTRACE_CAPTURE after its command exits), so it cannot serve the replay sessions minitrain announces.
for kind in fifo zero; do
  got=0
  KIND=$kind timeout 120 "$DTRACE" bisect --launches --json --replay "$WORK/replay.sh" a b >"$OUT" 2>"$ERR" || got=$?
  [ "$got" = 0 ] || fail "$kind captures: bisect exit $got, expected 0 (kernel named)"
  json_valid dtrace-bisect "$OUT"
  json_is verdict '"named"'
  json_is culprit.op "\"$(planted splitk op)\""
  json_true 'any(n.startswith("confirmation failed: ") and n.endswith(": the captured output is not a regular file") for n in d["notes"])'
done
echo ok
