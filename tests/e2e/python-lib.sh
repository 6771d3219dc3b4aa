# Shared by the end-to-end tests of Python workloads (sourced; torch-lib.sh
# sources it too): lib.sh's assertions, $PYTHON (Debian's python3, or
# TORCH_PYTHON: tools/test.sh runs the 'python' suite again with the Debian 13
# root's python, tools/setup-torch2.sh) with the build tree's packages
# (PYTHONPATH=build/python, the one variable docs/python.md names).
. "$(dirname "$0")/lib.sh"
: "${SOURCE_ROOT:?}" "${BUILD_ROOT:?}"
PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
export PYTHONPATH="$BUILD_ROOT/python"
# A sanitizer build's libdtrace needs its runtime loaded before Python's own code
# (as in e2e/capi_python).
needed=$(ldd "$BUILD_ROOT/src/capi/libdtrace.so")
case "$needed" in
  *libasan*)
    export LD_PRELOAD=$(echo "$needed" | awk '/libasan|libubsan/ {printf "%s:", $3}')
    export ASAN_OPTIONS="detect_leaks=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}" ;;
esac

# need_python_module MODULE HINT: skips (status 77; a failure under CI, lib.sh's
# skip) when $PYTHON cannot import MODULE.
need_python_module() {
  "$PYTHON" -c "import $1" 2>/dev/null || skip "$PYTHON cannot import $1 ($2)"
}
