# Shared by the minitrain end-to-end tests (sourced, not a test itself).
# Needs MINITRAIN and DTRACE (set by meson test), jq.
set -euo pipefail
: "${MINITRAIN:?set MINITRAIN to the minitrain binary}"
: "${DTRACE:?set DTRACE to the dtrace binary}"
. "$(dirname "${BASH_SOURCE[0]}")/schema-lib.sh"
E2E_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # before the cd below
WORK=$(mktemp -d "${TMPDIR:-/tmp}/minitrain-e2e.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
. "$E2E_LIB_DIR/replays-lib.sh"

fail() { echo "FAIL: $*" >&2; exit 1; }

# mt ARGS...: minitrain, quiet on success.
mt() { "$MINITRAIN" "$@" >/dev/null; }

# expect_status N CMD...: CMD exits with N. A --json document that dtrace
# prints must follow its command's schema (json_valid).
expect_status() {
  local want=$1; shift
  local got=0
  "$@" >"$WORK/out.txt" 2>"$WORK/err.txt" || got=$?
  [ "$got" -eq "$want" ] || { cat "$WORK/err.txt" >&2; fail "'$*' exited $got, expected $want"; }
  # watch prints one event per line: watch-lib.sh's events_valid checks each.
  if [ "$1" = "$DTRACE" ] && [ "$2" != watch ] && [ -s "$WORK/out.txt" ]; then
    case " $* " in *" --json "*) json_valid "dtrace-$2" "$WORK/out.txt" ;; esac
  fi
}

# replay_argv RUN: the header's replay argv of RUN's rank 0, one word per line.
replay_argv() { head -n1 "$1/rank0.jsonl" | jq -r '.replay.argv[]'; }

# records FILE: the compared records of a log (no header, end or timing lines);
# fails, saying why, when FILE is missing or holds none, so that two missing
# logs never compare equal.
records() {
  [ -f "$1" ] || { echo "records: no log $1" >&2; return 1; }
  grep -v '"io":"timing"' "$1" | grep '"scope"' || { echo "records: $1 holds no record" >&2; return 1; }
}
