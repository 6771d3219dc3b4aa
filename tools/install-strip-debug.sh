#!/bin/sh
# Run by `meson install` (src/recorder/meson.build): removes the debug
# information from the installed static recorder library, which the default
# buildtype (debugoptimized) compiles in. It is nearly all of the archive
# (112.3 MB with it, 4.7 MB without; tools/bench/RESULTS.md) and no use to a
# program that links the recorder. The symbol table stays, so the archive
# links as before. `-Dinstall_debug_info=true` keeps it. $1 is the library's
# path under the prefix, or an absolute one.
set -eu
case "$1" in
  /*) lib="${DESTDIR:-}$1" ;;
  *) lib="$MESON_INSTALL_DESTDIR_PREFIX/$1" ;;
esac
[ -n "${MESON_INSTALL_QUIET:-}" ] || echo "Stripping debug information from $lib"
strip --strip-debug "$lib"
