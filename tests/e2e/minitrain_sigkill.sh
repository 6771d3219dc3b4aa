#!/usr/bin/env bash
# minitrain killed with SIGKILL at moments spread over a run: each rank's log
# reads back as whole lines plus at most one cut line at the end, `dtrace
# check` names exactly the steps that were begun and not ended, and every
# checkpoint left under its final name is whole (written to a temporary file
# and renamed): `minitrain --resume` loads it.
. "$(dirname "$0")/minitrain-lib.sh"

# expected_incomplete RUN: "rank step" per step begun and not ended, from the
# whole lines of each rank file; fails unless only the last line may be cut.
expected_incomplete() {
  python3 - "$1" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("*.jsonl")):
    data = f.read_bytes()
    lines = data.split(b"\n")
    last = lines.pop()  # b"" when the file ends with a newline
    whole = []
    for n, line in enumerate(lines, 1):
        try:
            whole.append(json.loads(line))
        except ValueError:
            sys.exit(f"{f}:{n}: a line that is not whole before the end of the file")
    if last:
        try:
            whole.append(json.loads(last))
        except ValueError:
            pass  # the one cut line a crash may leave
    if not whole or "dtrace" not in whole[0]:
        continue  # killed before its header was whole: the reader ignores the file
    begun, ended = {}, set()
    for r in whole[1:]:
        key = (r["rank"], r["step"])
        (ended.add(key) if r.get("end") else begun.setdefault(key, True))
    for rank, step in sorted(set(begun) - ended):
        print(rank, step)
PY
}

killed=0 checked=0 cut=0 loaded=0
# The last moment is an event, not a time: just after the first checkpoint is
# in place, so that however slow the machine one run leaves checkpoints.
for delay in 0.2 0.45 0.7 1.1 1.6 2.4 checkpoint; do
  out=$WORK/run-$delay ck=$WORK/ck-$delay
  "$MINITRAIN" --steps 100000 --ranks 2 --level layer --checkpoint-every 3 --checkpoint-dir "$ck" \
    --out "$out" >/dev/null 2>&1 &
  pid=$!
  if [ "$delay" = checkpoint ]; then
    waited=0
    until compgen -G "$ck/ckpt-*.bin" >/dev/null; do
      [ "$waited" -lt 1200 ] || { kill -KILL "$pid"; fail "no checkpoint written within 60 s"; }
      kill -0 "$pid" 2>/dev/null || fail "minitrain ended before it wrote a checkpoint"
      sleep 0.05
      waited=$((waited + 1))
    done
  else
    sleep "$delay"
  fi
  kill -KILL "$pid" 2>/dev/null || fail "minitrain ended before it was killed ($delay s)"
  # A process that already exited is a zombie kill still reaches: its status
  # says whether SIGKILL ended it (128 + 9) or it had ended by itself.
  status=0
  wait "$pid" 2>/dev/null || status=$?
  [ "$status" = 137 ] || fail "minitrain was not ended by SIGKILL after $delay s (wait status $status)"
  killed=$((killed + 1))
  [ -d "$out" ] || continue

  # The recorder writes a step's lines at its end, so a kill leaves a step
  # half-written only when it lands inside that write; a second copy cut
  # inside the last step's lines stands for that moment.
  cp -r "$out" "$out-cut"
  last=$out-cut/rank0.jsonl
  size=$(stat -c %s "$last")
  [ "$size" -le 400 ] || truncate -s $((size - 1 - (RANDOM * 32768 + RANDOM) % (size < 4096 ? size - 300 : 4096))) "$last"
  for run in "$out" "$out-cut"; do
    want=$(expected_incomplete "$run") || fail "killed after $delay s: $want"
    got=0
    "$DTRACE" check --json "$run" >"$WORK/check.json" 2>"$WORK/check.err" || got=$?
    if [ "$got" = 2 ]; then
      # Only a run none of whose files has a whole header is trouble.
      grep -q "no file of this run has a header" "$WORK/check.err" ||
        fail "killed after $delay s: dtrace check $run: $(cat "$WORK/check.err")"
      continue
    fi
    [ "$got" = 0 ] || [ "$got" = 1 ] || fail "killed after $delay s: dtrace check $run exit $got"
    named=$(jq -r '.violations[] | select(.kind == "incomplete-step") | "\(.rank) \(.step)"' \
      "$WORK/check.json" | sort)
    [ "$named" = "$(echo "$want" | sort)" ] ||
      fail "killed after $delay s: check $run names incomplete [$named], the log has [$want]"
    checked=$((checked + 1))
    [ -z "$want" ] || cut=$((cut + 1))
  done

  # No checkpoint half-written under its final name: each one loads.
  for f in "$ck"/ckpt-*.bin; do
    [ -e "$f" ] || continue
    step=$(basename "$f" .bin | sed 's/^ckpt-0*//')
    step=${step:-0}
    expect_status 0 "$MINITRAIN" --steps $((step + 1)) --ranks 2 --level layer --checkpoint-dir "$ck" \
      --resume --resume-step "$step" --out "$WORK/resumed-$delay-$step"
    loaded=$((loaded + 1))
  done
done
[ "$checked" -gt 0 ] || fail "no run was far enough along to check"
# Without these, "every checkpoint loads" and "check names the cut step" would
# pass having seen none.
[ "$cut" -gt 0 ] || fail "no checked run had an incomplete step"
[ "$loaded" -gt 0 ] || fail "no checkpoint was left to load (the runs were killed too early)"
echo "killed $killed, checked $checked runs ($cut with an incomplete step), loaded $loaded checkpoints"
