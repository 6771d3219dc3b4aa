#!/usr/bin/env bash
# Everything issue 5 can only show on a GPU, in one go, for a session that has
# one: build with CUDA (or use a build carried over), run the GPU tests (device
# vs CPU, hash --gpu, the C program on libdtrace), then the fingerprint
# benchmark, then minitrain on the GPU (tools/minitrain-gpu-check.sh: kernel-level
# determinism, each planted switch bisected, loss, recording overhead, tokens/s),
# and print a short table at the end. Without nvcc or without a
# device it says so plainly, and the GPU rows read "skipped" / "not measured".
#
#   tools/gpu-check.sh [DIR]             DIR: a CUDA build directory (default
#                                        build-gpu; set up and built if missing)
#                                        or a bundle made by --pack
#   tools/gpu-check.sh --pack OUT [DIR]  copy the built programs and the shared
#                                        libraries they need, stripped, to OUT
#                                        (a few MB): a machine with a GPU but
#                                        without the build dependencies runs
#                                        `tools/gpu-check.sh OUT` from the same
#                                        source tree.
set -uo pipefail
cd "$(dirname "$0")/.."
export PATH="/usr/local/cuda/bin:$PATH"

# Programs the check runs, by their path inside a build directory.
programs=(dtrace tests/unit_tests tests/gpu_tests tools/bench/fingerprint_gpu
          tools/bench/xxh3_file tools/bench/fingerprint_cpu tools/minitrain/minitrain)

if [ "${1:-}" = --pack ]; then
  out=${2:?usage: tools/gpu-check.sh --pack OUT [BUILD_DIR]}
  build=${3:-build-gpu}
  rm -rf "$out" && mkdir -p "$out/lib" "$out/src/capi"
  for p in "${programs[@]}"; do
    [ -x "$build/$p" ] || { echo "gpu-check: $build/$p is missing: build with CUDA first" >&2; exit 2; }
    mkdir -p "$out/$(dirname "$p")" && cp "$build/$p" "$out/$p" && strip "$out/$p"
  done
  find "$build/src/capi" -maxdepth 1 -name 'libdtrace.so*' ! -type d -exec cp -P {} "$out/src/capi/" \;
  strip "$out/src/capi/libdtrace.so."*.*.*
  # Shared libraries from outside the C runtime (xxhash, simdjson, spdlog, fmt).
  for p in "${programs[@]}"; do ldd "$build/$p"; done | awk '/=> \// {print $3}' | sort -u |
    grep -vE '/lib(c|m|gcc_s|stdc\+\+|pthread|dl|rt|dtrace)\.so' | while read -r lib; do cp -L "$lib" "$out/lib/"; done
  touch "$out/BUNDLE"
  du -sh "$out"
  exit 0
fi

build=${1:-build-gpu}
log=$(mktemp -d)
trap 'rm -rf "$log"' EXIT

if [ -f "$build/BUNDLE" ]; then
  export LD_LIBRARY_PATH="$PWD/$build/lib:$PWD/$build/src/capi${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  echo "gpu-check: using the bundle $build"
else
  if [ ! -f "$build/build.ninja" ]; then
    command -v nvcc >/dev/null ||
      { echo "gpu-check: no nvcc on PATH (nor /usr/local/cuda/bin): cannot build the GPU code" >&2; exit 2; }
    meson setup "$build" -Dcuda=enabled >"$log/setup" 2>&1 || { cat "$log/setup"; exit 2; }
  fi
  meson compile -C "$build" >"$log/build" 2>&1 || { tail -40 "$log/build"; exit 2; }
  [ -x "$build/tests/gpu_tests" ] ||
    { echo "gpu-check: $build is not a CUDA build (meson setup $build -Dcuda=enabled)" >&2; exit 2; }
fi

device=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -1)
[ -n "$device" ] || device="none visible (nvidia-smi found no GPU)"
echo "gpu-check: device: $device"

# Runs one check; prints pass / SKIPPED (reason) / FAIL, keeping failures'
# output. A check that skips where the system shows a GPU is a FAIL
# (tools/gpu-present.sh), never a pass or a quiet SKIPPED.
. tools/gpu-present.sh
check() {
  local name=$1 out status verdict
  shift
  out=$("$@" 2>&1)
  status=$?
  verdict=$(check_verdict "$status" "$out")
  case $verdict in FAIL*) echo "$out" >"$log/$name.failed" ;; esac
  echo "$verdict"
}
c_program() {  # the C program against libdtrace, compared with dtrace hash
  if [ -f "$build/BUNDLE" ]; then
    local scratch
    scratch=$(mktemp -d)
    head -c 200003 /dev/urandom >"$scratch/input.bin"
    ${CC:-cc} -std=c99 -Wall -Wextra -Werror -Iinclude -o "$scratch/c_program" \
      tests/capi/fingerprint_file.c -L"$build/src/capi" -ldtrace || return 1
    [ "$("$scratch/c_program" "$scratch/input.bin")" = "$("$build/dtrace" hash "$scratch/input.bin")" ]
    local status=$?
    rm -rf "$scratch"
    return $status
  fi
  DTRACE="$build/dtrace" BUILD_ROOT="$build" SOURCE_ROOT="$PWD" \
    PREFIX="$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')" \
    LIBDIR="$(meson introspect "$build" --buildoptions | python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="libdir"))')" \
    tests/e2e/c_api_install.sh
}
unit=$(check unit "$build/tests/unit_tests")
gpu_tests=$(check gpu "$build/tests/gpu_tests")
hash_gpu=$(check hash_gpu env DTRACE="$build/dtrace" HAVE_CUDA=1 tests/e2e/hash_gpu.sh)
c_api=$(check c_api c_program)
for failed in "$log"/*.failed; do [ -f "$failed" ] && { echo "== ${failed##*/}"; cat "$failed"; }; done

tools/bench/fingerprint.sh "$build" "${REPEATS:-3}" | tee "$log/bench"

echo
echo "gpu-check summary  $(date -u +%Y-%m-%dT%H:%MZ)  device: $device"
printf '  %-42s %s\n' "unit tests (lane arithmetic vs libxxhash)" "$unit"
printf '  %-42s %s\n' "GPU tests (device vs CPU, sizes, batch)" "$gpu_tests"
printf '  %-42s %s\n' "dtrace hash --gpu vs CPU" "$hash_gpu"
printf '  %-42s %s\n' "C program on libdtrace vs dtrace hash" "$c_api"
grep -E "^CPU|XXH3|dtrace hash|dtrace::fingerprint|1 GiB|batch, |torch|device |not measured|FAILED" "$log/bench" |
  sed 's/^ */  bench: /'
echo "  minitrain --backend cuda (issue 6):"
minitrain_status=0
case "$gpu_tests" in
  SKIPPED*) printf '  %-46s %s\n' "minitrain --backend cuda" "SKIPPED (no CUDA device, as for the GPU tests)" ;;
  *)
    tools/minitrain-gpu-check.sh "$build" | tee "$log/minitrain"
    minitrain_status=${PIPESTATUS[0]}
    ;;
esac
case "$gpu_tests$hash_gpu$c_api$unit" in *FAIL*) exit 1 ;; esac
[ "$minitrain_status" = 0 ] || exit 1
