#!/usr/bin/env bash
# dtrace_torch as `meson install` leaves it: the package in python3's site
# directory under the prefix, beside the dtrace package it is built on, whose
# _paths.py names the installed libdtrace, and (relocated to a scratch root, as
# a DESTDIR package would be) it imports and fingerprints bytes as `dtrace hash`
# does, through dtrace_torch's own records.
. "$(dirname "$0")/torch-lib.sh"
: "${PYTHON_DIR:?}" "${PREFIX:?}" "${LIBDIR:?}"
meson install -C "$BUILD_ROOT" --destdir "$WORK/root" --no-rebuild --quiet >/dev/null || fail "meson install"
site="$WORK/root$PYTHON_DIR"
[ -f "$site/dtrace_torch/__init__.py" ] || fail "dtrace_torch not installed in $PYTHON_DIR"
case "$LIBDIR" in /*) libdir="$LIBDIR" ;; *) libdir="$PREFIX/$LIBDIR" ;; esac
grep -q "LIBDTRACE = \"$libdir/libdtrace.so.0\"" "$site/dtrace/_paths.py" || fail "installed _paths.py: $(cat "$site/dtrace/_paths.py")"
# The site directory meson chose by default is /usr/bin/python3's (meson_options.txt),
# whatever python the test runs (TORCH_PYTHON: another Python version).
case "$PREFIX" in /usr | /usr/local)
  /usr/bin/python3 -c 'import sys; sys.exit(0 if any(p.rstrip("/") == sys.argv[1] for p in sys.path) else 1)' "$PYTHON_DIR" \
    || fail "$PYTHON_DIR is not on /usr/bin/python3's sys.path: the installed package would not import" ;;
esac
head -c 100003 /dev/urandom >bytes.bin
got=$(env -u PYTHONPATH LD_LIBRARY_PATH="$WORK/root$libdir" PYTHONPATH="$site" "$PYTHON" -c '
import sys, torch, dtrace_torch, dtrace.capi as L
from dtrace_torch.fingerprints import view
assert dtrace_torch.__file__.startswith(sys.argv[2]) and L.__file__.startswith(sys.argv[2]), (dtrace_torch.__file__, L.__file__)
t = torch.frombuffer(bytearray(open(sys.argv[1], "rb").read()), dtype=torch.uint8)
v = view(t)
print("%016x" % L.fingerprint_host(v.address, v.nbytes))' bytes.bin "$site") || fail "the installed package did not import"
want=$("$DTRACE" hash bytes.bin | cut -d' ' -f1)
[ "$got" = "$want" ] || fail "installed package: $got, dtrace hash: $want"
echo ok
