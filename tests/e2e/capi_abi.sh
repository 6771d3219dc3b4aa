#!/usr/bin/env bash
# The C API's symbol versions (include/dtrace/recorder.h, "Versions";
# src/capi/dtrace.map): a program compiled against the recorder.h of before
# DTRACE_1.1 (capi_abi/include, a copy) and linked against the libdtrace of
# then (no symbol versions; a stub with its soname stands in) runs against
# today's libdtrace, whose dtrace_run_options is larger, and the library reads
# and writes only the old struct (old_caller.c says how it notices). The same
# program linked against today's library binds to the DTRACE_1.1 entry points,
# which read past the old struct: that control must fail, or the check above
# proves nothing.
. "$(dirname "$0")/lib.sh"
: "${BUILD_ROOT:?}" "${SOURCE_ROOT:?}"
abi="$SOURCE_ROOT/tests/e2e/capi_abi"
libdir="$BUILD_ROOT/src/capi"
sanitize=""
case "$(ldd "$libdir/libdtrace.so")" in
  *libasan*) sanitize="-fsanitize=address,undefined -fno-sanitize-recover=undefined" ;;
esac
cflags=(-std=c11 -Wall -Wextra -Werror -I"$abi/include" -I"$SOURCE_ROOT/include")

readelf --dyn-syms -W "$libdir/libdtrace.so" >syms.txt
for f in dtrace_run_options_init dtrace_recorder_open dtrace_recorder_open_with; do
  [ "$(grep -c " $f@DTRACE_1.0\$" syms.txt)" = 1 ] || fail "$f@DTRACE_1.0 is not exported"
  [ "$(grep -c " $f@@DTRACE_1.1\$" syms.txt)" = 1 ] || fail "$f@@DTRACE_1.1 is not the default"
done
# Functions added later carry the version that added them, so a program using
# one fails to load against an older libdtrace, naming it.
for f in dtrace_session_open@@DTRACE_1.2 dtrace_recorder_discard_step@@DTRACE_1.3 \
  dtrace_recorder_pinned@@DTRACE_1.4 dtrace_recorder_tensors@@DTRACE_1.5; do
  [ "$(grep -c " $f\$" syms.txt)" = 1 ] || fail "$f is not exported"
done

mkdir old new
# shellcheck disable=SC2086 # sanitize is a word list
${CC:-cc} "${cflags[@]}" -shared -fPIC -Wl,-soname,libdtrace.so.0 -o old/libdtrace.so \
  "$abi/libdtrace_unversioned.c" || fail "the unversioned stand-in does not build"
# shellcheck disable=SC2086
${CC:-cc} "${cflags[@]}" $sanitize -o old_caller "$abi/old_caller.c" -Lold -ldtrace ||
  fail "old_caller does not build against the old header"
readelf -V old_caller >versions.txt
[ "$(grep -c DTRACE_1 versions.txt)" = 0 ] || fail "old_caller carries DTRACE_* symbol versions"

# The process environment may hold no replay request for dtrace_recorder_open.
env -u DTRACE_OUT -u DTRACE_REPLAY_STEP -u DTRACE_ISOLATE -u DTRACE_RUN_DIR LD_LIBRARY_PATH="$libdir" \
  ./old_caller with env 2>err.txt || fail "an old program fails on today's libdtrace: $(cat err.txt)"
for run in with env; do
  [ -f $run/rank0.jsonl ] || fail "the old program wrote no log in $run"
  head -n1 $run/rank0.jsonl | python3 -c 'import json,sys; h=json.load(sys.stdin); sys.exit("replicas" in h or h["world_size"] != 1)' ||
    fail "the old program's header is wrong: $(head -n1 $run/rank0.jsonl)"
  run_dtrace 0 check $run
done

# The control: linked against today's library, the same object reads 1.1's struct.
# shellcheck disable=SC2086
${CC:-cc} "${cflags[@]}" $sanitize -o new_caller "$abi/old_caller.c" -L"$libdir" -ldtrace ||
  fail "old_caller does not link against today's libdtrace"
if LD_LIBRARY_PATH="$libdir" ./new_caller new/with new/env 2>err.txt; then
  fail "the control passed: old_caller cannot tell which struct the library reads"
fi
echo ok
