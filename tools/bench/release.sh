# Sourced by the benchmarks in tools/bench/: their figures come from a release
# build (-Dbuildtype=release, -O3), the build a user or a packager makes, and
# RESULTS.md says so for each figure (issue 12).
#   release_build DIR [TARGET...]   sets DIR up as a release build when it does
#                       not exist (CUDA as meson finds it), compiles it (only
#                       the TARGETs, when named), and refuses a DIR of another
#                       build type rather than measure it.
#   build_type DIR      prints DIR's meson build type.
#   now                 the time in seconds, to the nanosecond (date +%s.%N).
#   median              the median of the numbers on stdin, one per line.
build_type() {
  meson introspect --buildoptions "$1" |
    python3 -c 'import json, sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"] == "buildtype"))'
}

release_build() {
  local dir=$1 source type
  shift
  source=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$source" -Dbuildtype=release >/dev/null
  fi
  type=$(build_type "$dir")
  if [ "$type" != release ]; then
    echo "$(basename "$0"): $dir is a $type build; benchmarks measure a release build" \
      "(meson setup $dir --buildtype=release, or name another BUILD_DIR)" >&2
    exit 2
  fi
  meson compile -C "$dir" "$@" >/dev/null
}

now() { date +%s.%N; }
median() { sort -g | awk '{v[NR]=$1} END {print (NR%2 ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2)}'; }
