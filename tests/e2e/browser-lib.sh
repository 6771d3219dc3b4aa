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

# layout PAGE: how the page lays out in a 1400-pixel-wide window, measured by
# the browser, in layout.json: the title (the h1: its text and box, and where
# the side panel begins), every command (.cmd: its text, whether any of it is
# hidden, clipped by its box or past the right edge of its section or panel),
# every pair of texts of one SVG whose boxes overlap, and the page's text. A
# copy of PAGE with the measuring script is what the browser opens.
layout() {
  python3 - "$1" "$WORK/measured.html" <<'PY' || fail "cannot add the measuring script to $1"
import sys
page = open(sys.argv[1], encoding="utf-8").read()
script = r"""<script>
window.addEventListener('load', function () {
  function box(e) { var r = e.getBoundingClientRect(); return {left: r.left, right: r.right, top: r.top, bottom: r.bottom}; }
  var out = {title: null, commands: [], overlaps: [], text: document.body.innerText};
  var h1 = document.querySelector('h1'), aside = document.querySelector('aside');
  if (h1) { out.title = box(h1); out.title.text = h1.textContent;
            out.title.panel_left = aside ? aside.getBoundingClientRect().left : window.innerWidth; }
  document.querySelectorAll('.cmd').forEach(function (c) {
    var holder = c.closest('section') || c.closest('aside') || document.body;
    out.commands.push({text: c.textContent, box: box(c), holder: box(holder),
                       clipped: c.scrollWidth > c.clientWidth + 1 || c.scrollHeight > c.clientHeight + 1});
  });
  document.querySelectorAll('svg').forEach(function (svg) {
    var texts = Array.prototype.slice.call(svg.querySelectorAll('text')).map(function (t) {
      return {text: t.textContent, box: box(t)}; });
    for (var i = 0; i < texts.length; ++i) for (var j = i + 1; j < texts.length; ++j) {
      var a = texts[i].box, b = texts[j].box;
      if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)
        out.overlaps.push([svg.id, texts[i].text, texts[j].text]);
    }
  });
  var pre = document.createElement('pre'); pre.id = 'layout'; pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
});
</script>"""
open(sys.argv[2], "w", encoding="utf-8").write(page.replace("</body>", script + "</body>", 1))
PY
  chromium_run --window-size=1400,1000 --dump-dom "file://$WORK/measured.html" >"$WORK/dom.html" 2>"$WORK/browser.log" ||
    fail "chromium --dump-dom $1: exit status $?"
  python3 - "$WORK/dom.html" "$WORK/layout.json" <<'PY' || fail "the browser measured nothing on $1"
import html, re, sys
m = re.search(r'<pre id="layout">(.*?)</pre>', open(sys.argv[1], encoding="utf-8").read(), re.S)
if not m:
    sys.exit("no layout in the dumped page")
open(sys.argv[2], "w", encoding="utf-8").write(html.unescape(m[1]))
PY
}

# reads_well PAGE WORD...: PAGE read in a 1400x1000 window: its title is on the
# first screen, beside the side panel, and names every WORD; every command can
# be read in full where it is shown; no two texts of a drawing are drawn over
# each other; no count says "1 ranks" (or records, steps, ...).
reads_well() {
  local page=$1
  shift
  layout "$page"
  python3 - "$WORK/layout.json" "$@" <<'PY' || fail "$page does not read well (see above)"
import json, re, sys
d, words = json.load(open(sys.argv[1])), sys.argv[2:]
problems = []
t = d["title"]
if t is None:
    problems.append("no title (h1)")
else:
    if t["bottom"] > 1000 or t["top"] < 0:
        problems.append(f"the title is not on the first screen of 1000 pixels: {t['top']:.0f}-{t['bottom']:.0f}")
    if t["right"] > t["panel_left"] + 0.5:
        problems.append(f"the title runs under the side panel: {t['right']:.0f} > {t['panel_left']:.0f}")
    for w in words:
        if w not in t["text"]:
            problems.append(f"the title {t['text']!r} does not name {w!r}")
for c in d["commands"]:
    if c["clipped"] or c["box"]["right"] > c["holder"]["right"] + 0.5:
        problems.append(f"a command cannot be read in full where it is shown: {c['text'][:80]}...")
for svg, a, b in d["overlaps"]:
    problems.append(f"in {svg or 'an unnamed drawing'}, {a!r} and {b!r} are drawn over each other")
for m in re.finditer(r"\b1 (ranks|records|steps|replays|repetitions|elements|outputs|distinct outputs)\b", d["text"]):
    problems.append(f"a plural after one: {d['text'][max(0, m.start() - 30):m.end() + 10]!r}")
for p in problems:
    print(p, file=sys.stderr)
sys.exit(1 if problems else 0)
PY
}
