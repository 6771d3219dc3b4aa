# Shared by the dtrace watch tests (sourced, not a test itself), after lib.sh
# or minitrain-lib.sh: watch --json prints one event per line, so each line is
# validated against the dtrace-watch schema on its own.
WRITER="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/watch-writer.py"

# events_valid FILE: every line of FILE is a dtrace-watch event following its schema.
events_valid() {
  local n=0
  while IFS= read -r line; do
    n=$((n + 1))
    printf '%s\n' "$line" >"$WORK/event.json"
    json_valid dtrace-watch "$WORK/event.json"
  done <"$1"
  [ "$n" -gt 0 ] || fail "watch printed no event"
}

# last_event FILE: the last line of FILE, for jq.
last_event() { tail -n1 "$1"; }
