#!/usr/bin/env bash
# CPU time (user, system) and peak RSS of `dtrace diff` binaries against `cmp`
# over the same eight file pairs, on the runs tools/bench/diff.sh generated and
# cached in $WORK (run that first). Wall clock is noise on a shared machine;
# CPU time resolves changes of about 10% there. Alternates the binaries and cmp
# REPEATS times per shape and prints medians.
#
#   tools/bench/diff_cpu.sh DTRACE_BINARY...
#   REPEATS=5 WORK=/tmp/dtrace-bench-diff SHAPES="layer-1400 small-24000"
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: $0 DTRACE_BINARY..." >&2; exit 2; }
work=${WORK:-/tmp/dtrace-bench-diff}
repeats=${REPEATS:-5}
shapes=${SHAPES:-layer-1400 small-24000}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for shape in $shapes; do
  d=$work/$shape
  [ -f "$d/.done" ] || { echo "$d: not generated (run tools/bench/diff.sh first)" >&2; exit 2; }
  cat "$d"/a/* "$d"/b/* >/dev/null
  for ((i = 0; i < repeats; i++)); do
    n=0
    for b in "$@"; do
      n=$((n + 1))
      /usr/bin/time -f "$shape $n:$(basename "$b") %U %S %M" -a -o "$out" "$b" diff "$d/a" "$d/b" >/dev/null
    done
    /usr/bin/time -f "$shape cmp %U %S 0" -a -o "$out" \
      bash -c "for r in 0 1 2 3 4 5 6 7; do cmp $d/a/rank\$r.jsonl $d/b/rank\$r.jsonl >/dev/null || :; done"
  done
done
python3 - "$out" <<'PY'
import collections, statistics, sys
runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    shape, name, user, system, rss = line.split()
    runs[(shape, name)].append((float(user), float(system), int(rss) / 1024))
print(f"{'shape':12} {'binary':24} {'user':>6} {'sys':>6} {'total':>6} {'/cmp':>6} {'RSS MiB':>8}")
for shape in dict.fromkeys(s for s, _ in runs):
    cmp = statistics.median(u + s for u, s, _ in runs[(shape, 'cmp')])
    for (s_, name), v in runs.items():
        if s_ != shape:
            continue
        user = statistics.median(x[0] for x in v)
        system = statistics.median(x[1] for x in v)
        total = statistics.median(x[0] + x[1] for x in v)
        rss = statistics.median(x[2] for x in v)
        print(f"{shape:12} {name:24} {user:6.2f} {system:6.2f} {total:6.2f} {total / cmp:6.2f} {rss:8.1f}")
PY
