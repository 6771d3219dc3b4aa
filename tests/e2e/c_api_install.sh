#!/usr/bin/env bash
# The C API as a user gets it: `meson install` into a scratch root, a C program
# compiled with the installed dtrace.pc and dtrace.h and linked to the installed
# libdtrace.so, whose digest must equal `dtrace hash`'s.
set -euo pipefail
: "${DTRACE:?}" "${BUILD_ROOT:?}" "${SOURCE_ROOT:?}" "${PREFIX:?}" "${LIBDIR:?}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

meson install -C "$BUILD_ROOT" --destdir "$scratch/root" --no-rebuild --quiet >/dev/null
root="$scratch/root$PREFIX"
case "$LIBDIR" in /*) libdir="$scratch/root$LIBDIR" ;; *) libdir="$root/$LIBDIR" ;; esac
[ -f "$root/include/dtrace/dtrace.h" ] || { echo "dtrace.h not installed under $root/include"; exit 1; }
[ -f "$libdir/pkgconfig/dtrace.pc" ] || { echo "dtrace.pc not installed under $libdir/pkgconfig"; exit 1; }

# pkg-config relocated to the scratch root, as for a package built with DESTDIR.
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --define-variable=prefix="$root" --cflags --libs dtrace)
# A sanitizer build's libdtrace needs the sanitizer runtime loaded first: the
# C program is then built with the same sanitizers, as its users would be.
sanitize=""
# (ldd's output is taken whole first: `ldd | grep -q` under pipefail can read as
# "no match" when grep exits early and ldd dies of SIGPIPE.)
needed=$(ldd "$libdir/libdtrace.so")
case "$needed" in *libasan*) sanitize="-fsanitize=address,undefined" ;; esac
${CC:-cc} -std=c99 -Wall -Wextra -Werror $sanitize -o "$scratch/fingerprint_file" \
  "$SOURCE_ROOT/tests/capi/fingerprint_file.c" $flags

head -c 200003 /dev/urandom >"$scratch/input.bin"
got=$(LD_LIBRARY_PATH="$libdir" "$scratch/fingerprint_file" "$scratch/input.bin")
want=$("$DTRACE" hash "$scratch/input.bin")
echo "C program: $got"
echo "dtrace:    $want"
[ "$got" = "$want" ]
