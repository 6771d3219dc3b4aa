#!/bin/bash
# The HTML report (dtrace(1), HTML REPORT) opened in a real browser, headless
# Chromium: the report of a minitrain divergence (`diff --html`, then `bisect
# --html`) loads without a console message or a script error, marks the origin
# rank's map cell as the origin, refers to nothing outside itself, and its
# screenshot is a picture (many colours, the origin's red among them). Then
# the 4,096-rank case: a generated run of 4,096 ranks, and a synthetic
# divergence of 4,096 ranks by 1,000,000 steps, each rendered within budget.
# The checks are shown to fail on a page with a script error and on a page
# that fetches something.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bisect-lib.sh"  # lib.sh moves into the test's own directory
. "$here/browser-lib.sh"
: "${MAKE_RUN:?MAKE_RUN must name tools/bench/make_run}"
: "${MAKE_REPORT:?MAKE_REPORT must name tools/bench/make_report}"

# The checks can fail: a script error, a console message, a fetched image.
cat >bad.html <<'HTML'
<!DOCTYPE html><html><head><meta charset="utf-8"></head><body data-js-errors="0">
<script>window.addEventListener('error',function(){document.body.setAttribute('data-js-errors','1');});</script>
<img src="https://example.invalid/x.png"><script>console.log("hello"); not_a_function();</script></body></html>
HTML
dump_dom "$WORK/bad.html"
(page_clean) 2>/dev/null && fail "page_clean passed a page with a script error"
grep -qF ':CONSOLE' browser.log || fail "chromium logged no console message for bad.html"
(self_contained bad.html) 2>/dev/null && fail "self_contained passed a page that fetches an image"

# A minitrain divergence at layer level: the first mismatch is an origin.
mt --steps 3 --ranks 4 --level layer --nondet splitk --chaos-seed 1 --out a
mt --steps 3 --ranks 4 --level layer --nondet splitk --chaos-seed 2 --out b
run_dtrace 1 diff --json a b
json_is first.role '"origin"'
origin=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["first"]["rank"])' "$OUT")
location=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["first"]["a_location"])' "$OUT")
run_dtrace 1 diff --html diff.html a b
err_has "report: diff.html"
[ -s diff.html ] || fail "diff --html wrote no page"
self_contained diff.html
dump_dom "$WORK/diff.html"
page_clean
[ "$(origin_cell_role dom.html "$origin")" = origin ] || fail "rank $origin's map cell is not marked origin"
grep -qF 'data-match="differs" data-role="origin"' dom.html || fail "the strip does not mark the origin record"
grep -qF "A: $location" dom.html || fail "the origin's record ($location) is not on the page"
screenshot "$WORK/diff.html" diff.png
not_blank diff.png '#c0392b'

# A report never replaces what a user recorded, nor a file that is not a report.
run_dtrace 2 diff --html a/rank0.jsonl a b
trouble_is "--html a/rank0.jsonl: inside the run a"
echo "notes" >notes.txt
run_dtrace 2 diff --html notes.txt a b
trouble_is "--html notes.txt: exists and is not an HTML report"
[ "$(cat notes.txt)" = notes ] || fail "notes.txt was modified"
run_dtrace 1 diff --html diff.html a b  # an earlier report is replaced
ls .diff.html.* 2>/dev/null && fail "a temporary file was left behind"

# A path bisect cannot write is refused before any replay runs.
run_dtrace 2 bisect --trust --html nodir/bisect.html a b
trouble_is "--html nodir/bisect.html: no directory nodir"

# bisect --html: the ladder of stages and the evidence, with the map.
run_dtrace 0 bisect --trust --html bisect.html
[ -s bisect.html ] || fail "bisect --html wrote no page"
self_contained bisect.html
dump_dom "$WORK/bisect.html"
page_clean
for stage in restore layer kernel confirm; do
  grep -qF "id=\"stage-$stage\"" dom.html || fail "the ladder lacks stage $stage"
done
grep -qF 'id="histogram"' dom.html || fail "no ulp histogram"
grep -qF 'id="repetitions"' dom.html || fail "no outputs per repetition"
grep -qF 'DTRACE_ISOLATE=' dom.html || fail "no replay command"
[ "$(origin_cell_role dom.html "$origin")" = origin ] || fail "bisect's page: rank $origin's cell is not origin"
# Read at 1400x1000, as report_reading reads a run of one rank.
reads_well "$WORK/bisect.html" named "rank $origin"
reads_well "$WORK/diff.html" diverged "rank $origin"
screenshot "$WORK/bisect.html" bisect.png
not_blank bisect.png '#c0392b'

# 4,096 ranks: a generated run, one planted origin (rank 1234, step 5, the
# first layer's output), diffed into a page.
"$MAKE_RUN" big-a --ranks 4096 --steps 8 --layers 1 --records 4 >/dev/null || fail "make_run big-a"
"$MAKE_RUN" big-b --ranks 4096 --steps 8 --layers 1 --records 4 --diverge 5:1234:2 >/dev/null || fail "make_run big-b"
run_dtrace 1 diff --html big.html big-a big-b
self_contained big.html
dump_dom "$WORK/big.html"
page_clean
[ "$(origin_cell_role dom.html 1234)" = origin ] || fail "4,096 ranks: rank 1234's cell is not origin"
echo "4096 ranks x 8 steps (generated run): $(stat -c %s big.html) bytes"

# 4,096 ranks by 1,000,000 steps, every rank diverged: rendered, and its cost
# beside an empty page's (Chromium's own start-up).
"$MAKE_REPORT" huge.html --ranks 4096 --steps 1000000 --origin 1234 || fail "make_report"
size=$(stat -c %s huge.html)
[ "$size" -lt 4000000 ] || fail "4,096 x 1,000,000: $size bytes, more than a few MB"
self_contained huge.html
printf '<!DOCTYPE html><html><body data-js-errors="0"></body></html>\n' >empty.html
t0=$(date +%s.%N); dump_dom "$WORK/empty.html"; t1=$(date +%s.%N)
dump_dom "$WORK/huge.html"; t2=$(date +%s.%N)
page_clean
[ "$(origin_cell_role dom.html 1234)" = origin ] || fail "4,096 x 1,000,000: rank 1234's cell is not origin"
screenshot "$WORK/huge.html" huge.png
not_blank huge.png '#c0392b'
# The page's own clock, navigation to the load event (man dtrace: well under
# a second; the bound leaves room for a loaded CI machine).
load_ms=$(grep -o 'data-load-ms="[0-9]*"' dom.html | grep -o '[0-9]*')
[ -n "$load_ms" ] || fail "the page recorded no load time"
[ "$load_ms" -lt 3000 ] || fail "4,096 x 1,000,000: $load_ms ms to load"
echo "4096 ranks x 1000000 steps (synthetic): $size bytes; loaded in $load_ms ms (page's clock);" \
  "chromium --dump-dom $(echo "$t2 - $t1" | bc) s against $(echo "$t1 - $t0" | bc) s for an empty page"
echo "ok"
