# Shared by the browser tests (sourced after lib.sh): Debian's chromium,
# headless, on a page of ours. Every page is checked the same way: it loads
# without a console message or a script error, and refers to nothing outside
# itself.
CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || true)}
if [ -z "$CHROMIUM" ]; then
  skip "no chromium (tools/setup-deps.sh installs Debian's)"
fi
PNG_COLOURS="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/png_colours.py"

# chromium ARGS... URL: headless, its profile inside the test's directory,
# console messages on stderr (browser.log).
chromium_run() {
  timeout 120 "$CHROMIUM" --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars \
    --user-data-dir="$WORK/chromium-profile" --enable-logging=stderr --v=0 "$@"
}

# dump_dom PAGE: the DOM after load, in dom.html; browser.log its messages.
dump_dom() {
  chromium_run --dump-dom "file://$1" >"$WORK/dom.html" 2>"$WORK/browser.log" ||
    fail "chromium --dump-dom $1: exit status $?"
  [ -s "$WORK/dom.html" ] || fail "chromium dumped no DOM for $1"
}

# page_clean: the last dumped page logged no console message and counted no
# script error (the page counts them into body's data-js-errors).
page_clean() {
  ! grep -F ':CONSOLE' "$WORK/browser.log" >&2 || fail "the page logged console messages"
  grep -qF '<body data-js-errors="0"' "$WORK/dom.html" || fail "the page recorded a script error: $(grep -o 'data-js-error="[^"]*"' "$WORK/dom.html")"
}

# self_contained PAGE: no reference to anything outside the file: no URL
# scheme, no src or href other than a fragment, no CSS url() or @import.
self_contained() {
  python3 - "$1" <<'PY' || fail "$1 refers to something outside itself"
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
bad = re.findall(r'[a-zA-Z][a-zA-Z0-9+.-]*://|\bsrc\s*=|\bhref\s*=\s*"(?!#)|url\(|@import|<link\b|<iframe\b', text)
if bad:
    sys.exit(f"external references: {sorted(set(bad))}")
PY
}

# screenshot PAGE PNG: a 1400x1000 screenshot.
screenshot() {
  chromium_run --window-size=1400,1000 --screenshot="$2" "file://$1" >/dev/null 2>"$WORK/screenshot.log" ||
    fail "chromium --screenshot $1: exit status $?"
  [ -s "$2" ] || fail "chromium wrote no screenshot of $1"
}

# not_blank PNG [#rrggbb]: the screenshot has many colours, and the colour
# asked for (the origin's red) on some pixels.
not_blank() {
  local counts
  counts=$(python3 "$PNG_COLOURS" "$1" ${2:+"$2"}) || fail "cannot read $1"
  local colours=${counts%%$'\n'*}
  [ "$colours" -ge 8 ] || fail "$1 is blank: $colours colours"
  if [ -n "${2:-}" ]; then
    [ "$(echo "$counts" | sed -n 2p)" -gt 0 ] || fail "$1 has no pixel of $2"
  fi
}

# origin_cell_role DOM RANK: the role marked on the map cell holding RANK.
origin_cell_role() {
  python3 - "$1" "$2" <<'PY'
import re, sys
dom, rank = open(sys.argv[1], encoding="utf-8").read(), int(sys.argv[2])
for m in re.finditer(r'<rect class="cell[^"]*" id="cell-\d+" data-role="(\w+)" data-rank-lo="(\d+)" data-rank-hi="(\d+)"', dom):
    if int(m[2]) <= rank <= int(m[3]):
        print(m[1])
        break
PY
}
