#!/usr/bin/env bash
# Where a bisect by replay sessions spends its wall time (issue 41): the
# bisect runs under strace (only execve, clock_nanosleep, inotify_init1,
# rename and exit_group traced, filtered in the kernel: the workload runs at
# nearly its own speed), and the timeline is printed in seconds from dtrace's
# start:
#   per workload process (one a rank): exec, the start and end of its
#     --startup-delay sleep (the first sleep of a second or more), ready (its
#     session's first wait for a request: inotify_init1), exit;
#   per request: when dtrace sent it (its rename into the session's
#     directory) and when its last rank wrote "done" (the status files'
#     time), and dtrace's own gap between an answer and the next request.
#   tools/bench/session_timeline.sh DTRACE RUN_A RUN_B [BISECT_FLAGS...]
# (default flags: --trust --first). The replays' directories are kept in a
# temporary directory, removed at the end.
set -euo pipefail
[ $# -ge 3 ] || { echo "usage: $0 DTRACE RUN_A RUN_B [BISECT_FLAGS...]" >&2; exit 2; }
dtrace=$1 run_a=$2 run_b=$3
shift 3
flags=("$@")
[ ${#flags[@]} -gt 0 ] || flags=(--trust --first)
work=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-timeline.XXXXXX")
trap 'rm -rf "$work"' EXIT
start=$(date +%s.%N)
strace -f --seccomp-bpf -ttt -o "$work/trace" -e trace=execve,clock_nanosleep,inotify_init1,rename,exit_group \
  "$dtrace" bisect "${flags[@]}" --keep "$work/keep" "$run_a" "$run_b" >"$work/out" 2>&1 || true
echo "bisect: $(echo "$(date +%s.%N) - $start" | bc -l | cut -c1-6) s (under strace), load $(cut -d' ' -f1-3 /proc/loadavg)"
t0=$(head -n1 "$work/trace" | awk '{print $2}')
dtrace_pid=$(head -n1 "$work/trace" | awk '{print $1}')
echo "processes (s from dtrace's start): the workload's, by the program each last executed"
awk -v t0="$t0" -v me="$dtrace_pid" '
  function prog(line,   p) { p = line; sub(/^[^"]*"/, "", p); sub(/".*/, "", p); n = split(p, parts, "/"); return parts[n] }
  /execve\(/ && !/ENOENT/ && !/resumed/ && $1 != me { name[$1] = prog($0); if (!($1 in ex)) { ex[$1] = $2 - t0; order[++n_] = $1 } }
  /clock_nanosleep\(/ && /tv_sec=[1-9]/ && !($1 in s0) { s0[$1] = $2 - t0 }
  /clock_nanosleep resumed/ && ($1 in s0) && !($1 in s1) { s1[$1] = $2 - t0 }
  /inotify_init1/ && ($1 in ex) && !($1 in rd) { rd[$1] = $2 - t0 }
  /\+\+\+ exited/ && ($1 in ex) { gone[$1] = $2 - t0 }
  END {
    printf "  %-8s %-14s %7s %7s %7s %7s %7s\n", "pid", "program", "exec", "sleep", "woke", "ready", "exit"
    for (i = 1; i <= n_; i++) {
      p = order[i]
      if (!(p in rd) && !(p in s0)) continue  # the launcher and its helpers
      printf "  %-8s %-14s %7.3f %7s %7s %7s %7s\n", p, substr(name[p], 1, 14), ex[p],
        (p in s0) ? sprintf("%.3f", s0[p]) : "-", (p in s1) ? sprintf("%.3f", s1[p]) : "-",
        (p in rd) ? sprintf("%.3f", rd[p]) : "-", (p in gone) ? sprintf("%.3f", gone[p]) : "-"
    }
  }' "$work/trace"
echo "requests: sent (rename into the session's directory), answered (the last rank's done), gap since the previous answer"
prev=""
grep -E 'rename\(".*/session-[A-Z]-[0-9]+/request\.[0-9]+\.json\.new"' "$work/trace" | while read -r _ time call _; do
  file=${call#rename(\"}
  file=${file%.new\",}
  sent=$(echo "$time - $t0" | bc -l)
  dir=$(jq -r '.env.DTRACE_OUT_DIR // empty' "$file")
  answered="-"
  if [ -n "$dir" ] && compgen -G "$dir/rank*.status" >/dev/null; then
    last=$(awk '$1 == "done" && $3 != "" {print $3}' "$dir"/rank*.status | sort -n | tail -n1)
    [ -z "$last" ] || answered=$(echo "$last / 1000000000 - $t0" | bc -l)
  fi
  gap=$([ -n "$prev" ] && [ "$prev" != "-" ] && echo "$sent - $prev" | bc -l || echo "")
  printf '  %-26s sent %7.3f  answered %7s  gap %s\n' "$(basename "$(dirname "$file")")/$(basename "$file")" "$sent" \
    "$([ "$answered" = - ] && echo - || printf '%.3f' "$answered")" "$([ -n "$gap" ] && printf '%.3f' "$gap")"
  [ "$answered" = - ] || prev=$answered
done
