#!/usr/bin/env bash
# Builds the libFuzzer targets (tests/fuzz/, clang, ASan+UBSan) and runs each for
# SECONDS (default 60) from a seed corpus made of testdata/'s *.jsonl files.
#   tools/fuzz.sh [SECONDS] [TARGET...]     (targets: fuzz_parse fuzz_reader)
# Exits non-zero when a target finds a crash, leak or hang; the input that
# triggered it is left in build-fuzz/artifacts/: fix it, add a unit test, and
# keep the input in tests/fuzz/regressions/TARGET-NAME, which runs first.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
shift || true
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(fuzz_parse fuzz_reader)
build=build-fuzz

command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ not found (apt-get install clang libclang-rt-14-dev)" >&2; exit 2; }
if [ ! -f "$build/build.ninja" ]; then
  CXX=clang++ meson setup "$build" -Dfuzz=true -Db_sanitize=address,undefined -Db_lundef=false \
    -Dbuildtype=debugoptimized >/dev/null
fi
# Quiet when it builds; the compiler's complaint when it does not (clang warns
# about things g++ lets pass, and -Werror is on).
if ! log=$(ninja -C "$build" -j2 "${targets[@]/#/tests/fuzz/}" 2>&1); then
  printf '%s\n' "$log" | grep -v '^\[' | tail -n 30 >&2
  echo "fuzz.sh: the fuzz build in $build failed" >&2
  exit 2
fi

# Seeds: whole files for the reader (cut to its input size limit), single lines
# for the parser. The corpus directories keep what the fuzzer learns between runs.
seed() {
  local target=$1 dir=$build/corpus/$1
  mkdir -p "$dir"
  [ -z "$(ls -A "$dir")" ] || return 0
  local i=0 f
  while IFS= read -r f; do
    i=$((i + 1))
    if [ "$target" = fuzz_reader ]; then
      head -c 65536 "$f" >"$dir/seed-$i"
    else
      head -n 40 "$f" >"$dir/seed-$i"
      sed -n 3p "$f" >"$dir/line-$i"
    fi
  done < <(find testdata -name '*.jsonl' -type f | sort)
}

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
mkdir -p "$build/artifacts"
# fuzz_reader writes its run directory under TMPDIR; libFuzzer may leave by
# _Exit, skipping the target's clean-up, so the directory is ours to empty.
export TMPDIR=$PWD/$build/tmp
rm -rf "$TMPDIR"
mkdir -p "$TMPDIR"
trap 'rm -rf "$TMPDIR"' EXIT
status=0
for target in "${targets[@]}"; do
  seed "$target"
  max_len=65536
  [ "$target" = fuzz_parse ] && max_len=8192
  # Inputs that crashed a target once (tests/fuzz/regressions/) must pass first.
  regressions=(tests/fuzz/regressions/"$target"-*)
  if [ -e "${regressions[0]}" ] && ! "$build/tests/fuzz/$target" "${regressions[@]}" 2>"$build/$target.log"; then
    echo "$target: a regression input fails again (see $build/$target.log)" >&2
    status=1
    continue
  fi
  echo "== $target: ${seconds}s" >&2
  if ! "$build/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len="$max_len" -dict=tests/fuzz/dtrace.dict -print_final_stats=1 \
      -artifact_prefix="$build/artifacts/$target-" "$build/corpus/$target" \
      2>"$build/$target.log"; then
    status=1
    echo "$target: FAILED (see $build/$target.log and $build/artifacts/)" >&2
  fi
  grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb|^Done" "$build/$target.log" >&2 || true
done
exit $status
