# Shared helpers for the end-to-end tests. Each tests/e2e/*.sh sources this file,
# runs the real binary ($DTRACE) on runs under $TESTDATA and asserts what a user
# sees: the exit status, fields of the --json document, lines of the text report.
# The first failed assertion prints what dtrace wrote and ends the test.

set -u
: "${DTRACE:?DTRACE must name the dtrace binary}"
: "${TESTDATA:?TESTDATA must name the testdata directory}"
# json_valid, before the cd below (this file may be named relative to here).
. "$(dirname "${BASH_SOURCE[0]}")/schema-lib.sh"

E2E_LIB_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)  # before the cd below
# dtrace keeps state in ./.dtrace/, so every test runs in a fresh temp directory,
# never in the source or build tree.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/dtrace-e2e.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
OUT=$WORK/stdout
ERR=$WORK/stderr
: >"$OUT"
: >"$ERR"

. "$E2E_LIB_DIR/replays-lib.sh"

# A test that cannot run here for want of a dependency: status 77, which meson
# counts as skipped. Under CI (CI=true, as .ci/run is run) a missing dependency
# is a failure instead, so an image without torch or Chromium cannot go green
# with those suites unrun; tools/setup-deps.sh installs them all. A machine
# without a GPU is the one honest skip (skip_no_gpu).
skip() {
  if [ "${CI:-}" = true ]; then
    echo "FAIL: $* (CI=true: a dependency the suite needs is missing; tools/setup-deps.sh installs it)" >&2
    exit 1
  fi
  echo "SKIP: $*"
  exit 77
}
skip_no_gpu() {
  echo "SKIP: $*"
  exit 77
}

fail() {
  {
    echo "FAIL: $*"
    echo "--- stdout of the last dtrace command"
    cat "$OUT"
    echo "--- stderr"
    cat "$ERR"
  } >&2
  exit 1
}

# run_dtrace STATUS ARG...: runs dtrace with ARGs and asserts its exit status.
# A --json document it prints must follow its command's schema (json_valid), so
# every test that reads a field also checks the whole contract.
run_dtrace() {
  local want=$1
  shift
  local got=0
  "$DTRACE" "$@" >"$OUT" 2>"$ERR" || got=$?
  [ "$got" = "$want" ] || fail "dtrace $*: exit status $got, expected $want"
  case " $* " in
    # watch prints one event per line: watch-lib.sh's events_valid checks each.
    *" --json "*) [ ! -s "$OUT" ] || [ "$1" = watch ] || json_valid "dtrace-$1" "$OUT" ;;
  esac
}


# json_is PATH JSON: the value at PATH in stdout's JSON document equals JSON.
# PATH is dot-separated object keys and list indices ("first.a.bits",
# "ranks.1.role", "compared.steps"); JSON is a JSON literal ('"origin"', 1, null).
json_is() {
  python3 -c '
import json, sys
doc, path, want = json.load(open(sys.argv[1])), sys.argv[2], json.loads(sys.argv[3])
value = doc
for part in path.split(".") if path else []:
    value = value[int(part)] if isinstance(value, list) else value[part]
if json.dumps(value, sort_keys=True) != json.dumps(want, sort_keys=True):
    sys.exit(f"{path} is {json.dumps(value)}, expected {json.dumps(want)}")
' "$OUT" "$1" "$2" || fail "JSON field $1"
}

# json_true EXPR: a Python expression over the document `d` holds.
json_true() {
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
if not eval(sys.argv[2]):
    sys.exit("does not hold: " + sys.argv[2])
' "$OUT" "$1" || fail "JSON check $1"
}

# out_has TEXT / err_has TEXT: stdout / stderr contains TEXT (a fixed string).
out_has() { grep -qF -- "$1" "$OUT" || fail "stdout lacks: $1"; }
out_lacks() { ! grep -qF -- "$1" "$OUT" || fail "stdout has: $1"; }
err_has() { grep -qF -- "$1" "$ERR" || fail "stderr lacks: $1"; }

# trouble_is MESSAGE: the command failed the way dtrace(1) (EXIT STATUS) says bad
# input fails: nothing on stdout and exactly one line `dtrace: error: MESSAGE...` on stderr.
trouble_is() {
  [ ! -s "$OUT" ] || fail "trouble must print nothing on stdout"
  [ "$(wc -l <"$ERR")" = 1 ] || fail "trouble must be one line on stderr"
  case "$(cat "$ERR")" in
    "dtrace: error: $1"*) ;;
    *) fail "stderr does not start with: dtrace: error: $1" ;;
  esac
}

# identical_over LO HI STEPS RANKS RECORDS: --json said identical over these.
identical_over() {
  json_is verdict '"identical"'
  json_is first null
  json_is ranks '[]'
  json_is compared.steps "[$1, $2]"
  json_is compared.step_count "$3"
  json_is compared.ranks "$4"
  json_is compared.records "$5"
}
