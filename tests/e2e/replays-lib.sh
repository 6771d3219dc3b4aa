# Sourced by lib.sh and minitrain-lib.sh once $WORK exists (not a test itself).
# E2E_REPLAYS=launches (meson's suite 'launches', where the bisect tests whose
# workloads serve replay sessions are registered a second time): every
# `dtrace bisect` the test runs, however it runs it, gets --launches, so each
# such test passes both ways (dtrace(1), --launches). The default is sessions.
if [ "${E2E_REPLAYS:-}" = launches ]; then
  real_dtrace=$DTRACE
  DTRACE=$WORK/dtrace-launches
  printf '#!/bin/sh\nif [ "$1" = bisect ]; then shift; exec %q bisect --launches "$@"; fi\nexec %q "$@"\n' \
    "$real_dtrace" "$real_dtrace" >"$DTRACE"
  chmod +x "$DTRACE"
  export DTRACE
fi
