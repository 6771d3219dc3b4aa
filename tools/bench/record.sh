#!/usr/bin/env bash
# Benchmark: what `dtrace record -- CMD` costs against the explicit Recorder and
# against no recording, on the PyTorch example (issue 39), in one run.
#
# (a) Recording cost at step level. Rows, each the same model (gpt_moe.py's
# GPT-MoE, ARGS below) trained on the CPU, one thread:
#   plain       tools/torch/plain_lm.py, no recording           (the baseline)
#   no-record   tools/torch/gpt_moe.py --no-record (its loop without the Recorder)
#   record      dtrace record --out DIR -- python3 plain_lm.py   (dtrace_torch.auto)
#   explicit    gpt_moe.py --run-dir DIR (its own Recorder, no checkpoints)
#   explicit+ck gpt_moe.py --run-dir DIR --checkpoint-dir C --checkpoint-every 1
#               (what its bisects restore from)
# Each command runs for S1 and S2 steps (STEPS="S1 S2"), REPEATS times, the
# rows alternating; a row's step time is the slope (median at S2 - median at
# S1) / (S2 - S1), which leaves its start-up out, and its start-up is what the
# S1 run took beyond S1 steps. Ratios against the baseline's, measured in the
# same run.
# (b) A bisect's wall time: --nondet combine, 2 steps, two runs recorded and
# bisected (--trust) with replay sessions and with --launches, by dtrace record
# (plain_lm.py) and by the explicit Recorder (gpt_moe.py, a checkpoint every
# step). Baseline: the explicit Recorder's bisect with sessions, measured in the
# same run. STARTUP_DELAY seconds (default 0) of start-up in each launch of the
# workload (its replays included) stand in for a cluster job's.
#
#   tools/bench/record.sh [BUILD_DIR] [REPEATS]      (defaults: build-release, 3)
#   STEPS="4 64" STARTUP_DELAY=0 ARGS="--layers 2 --width 32" PYTHON=/usr/bin/python3
set -euo pipefail
. "$(dirname "$0")/release.sh"
source_root=$(cd "$(dirname "$0")/../.." && pwd)
release_build "${1:-build-release}"
build=$(cd "${1:-build-release}" && pwd)
repeats=${2:-3}
read -r s1 s2 <<<"${STEPS:-4 64}"
delay=${STARTUP_DELAY:-0}
read -r -a model <<<"${ARGS:---layers 2 --width 32}"
python=${PYTHON:-/usr/bin/python3}
dtrace="$build/dtrace"
plain_lm="$source_root/tools/torch/plain_lm.py"
gpt_moe="$source_root/tools/torch/gpt_moe.py"
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-bench-record.XXXXXX")
trap 'rm -rf "$work"' EXIT
cd "$work"


# train ROW STEPS DIR: one run of ROW's command for STEPS steps (into DIR when
# it records). Only the explicit rows see PYTHONPATH: dtrace record sets its own.
train() {
  local row=$1 steps=$2 dir=$3
  case "$row" in
    plain) env -u PYTHONPATH "$python" "$plain_lm" --steps "$steps" "${model[@]}" ;;
    no-record) PYTHONPATH="$build/python" "$python" "$gpt_moe" --steps "$steps" --no-record --run-dir "$dir" "${model[@]}" ;;
    record) env -u PYTHONPATH "$dtrace" record --out "$dir" -- "$python" "$plain_lm" --steps "$steps" "${model[@]}" ;;
    explicit) PYTHONPATH="$build/python" "$python" "$gpt_moe" --steps "$steps" --run-dir "$dir" "${model[@]}" ;;
    explicit+ck) PYTHONPATH="$build/python" "$python" "$gpt_moe" --steps "$steps" --run-dir "$dir" \
      --checkpoint-dir "ck-$dir" --checkpoint-every 1 "${model[@]}" ;;
  esac >/dev/null 2>"$work/train.err" || { cat "$work/train.err" >&2; echo "record.sh: $row failed" >&2; exit 2; }
}

rows=(plain no-record record explicit explicit+ck)
declare -A t1=() t2=()
for ((i = 0; i < repeats; i++)); do
  for row in "${rows[@]}"; do
    for steps in "$s1" "$s2"; do
      rm -rf run ck-run
      t0=$(now)
      train "$row" "$steps" run
      t=$(echo "$(now) - $t0" | bc -l)
      if [ "$steps" = "$s1" ]; then t1[$row]+="$t "; else t2[$row]+="$t "; fi
    done
  done
done
echo "(a) recording cost, step level: ${model[*]}, steps $s1 and $s2, medians of $repeats"
printf '%-12s %10s %10s %12s %11s %12s\n' row "run $s2 (s)" ratio "step (ms)" ratio "start-up (s)"
base_step="" base_run=""
for row in "${rows[@]}"; do
  a=$(printf '%s\n' ${t1[$row]} | median)
  b=$(printf '%s\n' ${t2[$row]} | median)
  step=$(echo "($b - $a) / ($s2 - $s1)" | bc -l)
  startup=$(echo "$a - $s1 * $step" | bc -l)
  [ -n "$base_step" ] || { base_step=$step; base_run=$b; }
  printf '%-12s %10.2f %9.2fx %12.1f %10.2fx %12.2f\n' "$row" "$b" "$(echo "$b / $base_run" | bc -l)" \
    "$(echo "$step * 1000" | bc -l)" "$(echo "$step / $base_step" | bc -l)" "$startup"
done

# (b) bisects. record_pair ROW: two runs with the combine planted, a and b.
record_pair() {
  rm -rf a b ck-a ck-b
  for r in a b; do
    case "$1" in
      record) env -u PYTHONPATH "$dtrace" record --out "$r" -- "$python" "$plain_lm" --steps 2 --nondet combine \
        --startup-delay "$delay" "${model[@]}" ;;
      explicit) PYTHONPATH="$build/python" "$python" "$gpt_moe" --steps 2 --nondet combine --startup-delay "$delay" \
        --run-dir "$r" --checkpoint-dir "ck-$r" --checkpoint-every 1 "${model[@]}" ;;
    esac >/dev/null 2>"$work/train.err" || { cat "$work/train.err" >&2; echo "record.sh: $1 failed" >&2; exit 2; }
  done
}
echo
echo "(b) bisect --trust of --nondet combine (2 steps), start-up delay ${delay} s, medians of $repeats"
declare -A times=()
for recorder in explicit record; do
  record_pair "$recorder"
  for ((i = 0; i < repeats; i++)); do
    for mode in sessions launches; do
      flags=()
      [ "$mode" = sessions ] || flags=(--launches)
      t0=$(now)
      PYTHONPATH="$build/python" "$dtrace" bisect --trust --json "${flags[@]}" a b >"bisect-$recorder-$mode.json" \
        2>/dev/null || true
      times[$recorder-$mode]+="$(echo "$(now) - $t0" | bc -l) "
    done
  done
done
printf '%-9s %-9s %10s %7s %9s %8s  %s\n' recorder mode "bisect (s)" ratio launches replays verdict
base=$(printf '%s\n' ${times[explicit-sessions]} | median)
for recorder in explicit record; do
  for mode in sessions launches; do
    j="bisect-$recorder-$mode.json"
    b=$(printf '%s\n' ${times[$recorder-$mode]} | median)
    printf '%-9s %-9s %10.2f %6.2fx %9s %8s  %s\n' "$recorder" "$(jq -r '.replay_mode' "$j")" "$b" \
      "$(echo "$b / $base" | bc -l)" "$(jq '.launches | length' "$j")" "$(jq '.replays | length' "$j")" \
      "$(jq -r '.verdict + " " + (.culprit.scope // "") + " " + (.culprit.op // "")' "$j")"
  done
done
