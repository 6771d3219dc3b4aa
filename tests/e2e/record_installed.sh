#!/bin/bash
# dtrace record picks its Python directory by which binary it is: the build
# tree's dtrace uses build/python, an installed one (here `meson install` into
# a scratch root) the directory meson installed the packages in, never the
# build tree's. (The installed binary names its real prefix; in the scratch
# root nothing is there, so it refuses and names it.)
. "$(dirname "$0")/lib.sh"
: "${BUILD_ROOT:?}" "${PREFIX:?}"
unset DTRACE_PYTHONPATH DTRACE_SESSION DTRACE_OUT_DIR DTRACE_OUT DTRACE_REPLAY_STEP DTRACE_ISOLATE

meson install -C "$BUILD_ROOT" --destdir "$WORK/root" --no-rebuild --quiet >/dev/null || fail "meson install"
installed="$WORK/root$PREFIX/bin/dtrace"
[ -x "$installed" ] || fail "no $installed"

DTRACE=$installed
"$DTRACE" record --out runs/a -- sh -c 'echo "$PYTHONPATH" >pythonpath' >"$OUT" 2>"$ERR"
if [ -e pythonpath ]; then
  # This machine has the packages installed under the prefix: the path is theirs.
  case "$(cat pythonpath)" in
    "$PREFIX"/*) ;;
    *) fail "the installed dtrace gave PYTHONPATH=$(cat pythonpath), not under $PREFIX" ;;
  esac
else
  err_has "(the Python directory of the installation)"
  err_has "no $PREFIX/"
fi
! grep -qF "$BUILD_ROOT" "$ERR" pythonpath 2>/dev/null || fail "the installed dtrace used the build tree"
echo ok
