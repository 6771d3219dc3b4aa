#!/usr/bin/env bash
# The dtrace package's post-mortem helpers (docs/python.md) against the real
# binary: minitrain runs that diverge (the split-K switch) and that do not,
# diff / bisect / check / show through dtrace.postmortem, each result read
# against the document the CLI prints itself; dtrace's exit status mapped (0/1
# results, 2 raises with dtrace's message naming the file); which binary runs
# (argument, DTRACE, the one the package goes with) and which schema validates
# (the one installed beside that binary first); forward compatibility (a later
# minor version's fields kept in `extra`, a major version refused); the same
# checks without jsonschema; every schema field a dataclass field; docs/python.md's
# example script as written; the package as `meson install` leaves it.
# Python: Debian's /usr/bin/python3, where dtrace runs. tools/test.sh's second
# pass (TORCH_PYTHON, Python 3.13 in a Debian 13 root, torch-lib.sh) cannot run
# the host's dtrace (its spdlog and fmt sonames are not there): there, at the
# end, that Python reads documents this test saved, through the same helpers.
. "$(dirname "$0")/bisect-lib.sh"
: "${BUILD_ROOT:?}" "${SOURCE_ROOT:?}" "${PREFIX:?}" "${PYTHON_DIR:?}"
PY=/usr/bin/python3
export PYTHONPATH="$BUILD_ROOT/python"
# The package finds dtrace by itself (the build's, named in its _paths.py), so
# DTRACE, which meson sets, is unset; the checks of which binary runs set it.
REAL=$DTRACE
unset DTRACE
# py: runs the Python on stdin with the runs' directory as cwd; an assert that
# fails prints its message and fails the test.
py() { "$PY" - "$@" || fail "the Python checks above failed"; }

mt --steps 2 --ranks 2 --level step --nondet splitk --chaos-seed 1 --out a
mt --steps 2 --ranks 2 --level step --nondet splitk --chaos-seed 2 --out b
mt --steps 2 --ranks 2 --level step --nondet splitk --chaos-seed 1 --out a2
"$REAL" diff --json a b >diff.json && fail "a and b did not diverge"
"$REAL" show --json --step 1 --rank 1 a >show.json || fail "dtrace show"
"$REAL" bisect --trust --json a b >bisect.json || fail "dtrace bisect a b"
"$MINITRAIN" --print-planted splitk >planted.json
"$PY" -c 'import jsonschema; jsonschema.Draft202012Validator' 2>/dev/null ||
  fail "$PY has no jsonschema 4 (tools/setup-deps.sh installs python3-jsonschema); the checks without it run below"
export REAL SOURCE_ROOT

# Every field each schema lists is a field of its dataclass, down every nested
# object: a field added to a schema without its dataclass fails here (readers
# still get it in `extra`, but typed is the point).
py <<'EOF'
import dataclasses, json, os, typing
from dtrace import documents
def objects(node, root):
    # The object schemas a property's value may be: through $ref, anyOf/oneOf, array items.
    if "$ref" in node:
        node = root["$defs"][node["$ref"].split("/")[-1]]
    found = [node] if "properties" in node else []
    for key in ("anyOf", "oneOf"):
        for option in node.get(key, []):
            found += objects(option, root)
    if isinstance(node.get("items"), dict):
        found += objects(node["items"], root)
    return found
def classes(hint):
    if dataclasses.is_dataclass(hint):
        return [hint]
    return [c for a in typing.get_args(hint) for c in classes(a)]
def covered(cls, node, root, path):
    hints = typing.get_type_hints(cls)
    for name, sub in node["properties"].items():
        assert name in hints, f"{path}.{name}: in the schema, not in {cls.__name__}"
        for inner in classes(hints[name]):
            subs = objects(sub, root)
            assert subs, f"{path}.{name}: {inner.__name__} where the schema has no object"
            for o in subs:
                covered(inner, o, root, f"{path}.{name}")
for name, cls in (("diff", documents.Diff), ("bisect", documents.Bisect), ("check", documents.Check),
                  ("show", documents.Show)):
    root = json.load(open(os.path.join(os.environ["SOURCE_ROOT"], "schemas", f"dtrace-{name}-1.schema.json")))
    covered(cls, root, root, name)
EOF

# diff: diverged (exit 1) and identical (exit 0), every field as the CLI's document has it.
py <<'EOF'
import json, os, dataclasses
from dtrace import postmortem
d = postmortem.diff("a", "b")
want = json.load(open("diff.json"))
assert d.exit_status == 1 and d.diverged, (d.exit_status, d.diverged)
assert d.verdict == want["verdict"] == "diverged"
assert d.argv[0] == os.environ["REAL"], d.argv      # the package's own dtrace: the build's
for key in ("step", "rank", "seq", "scope", "op", "io", "name", "occurrence", "kind", "role", "detail",
            "a_location", "b_location"):
    assert getattr(d.first, key) == want["first"][key], (key, getattr(d.first, key), want["first"][key])
assert d.first.a.hash == want["first"]["a"].get("hash") and d.first.b.shape == want["first"]["b"].get("shape")
assert [(r.rank, r.step, r.scope, r.op) for r in d.ranks] == \
       [(r["rank"], r["step"], r["scope"], r["op"]) for r in want["ranks"]]
assert dataclasses.asdict(d.compared) == dict(want["compared"], extra={}), d.compared
assert d.runs.a == want["runs"]["a"] and d.notes == want["notes"]
schema = os.path.join(os.environ["SOURCE_ROOT"], "schemas", "dtrace-diff-1.schema.json")
assert d.validated_against == schema, d.validated_against
same = postmortem.diff("a", "a2")
assert same.exit_status == 0 and not same.diverged and same.verdict == "identical" and same.first is None
assert same.ranks == [] and same.compared.step_count == 2
window = postmortem.diff("a", "b", steps=(1, 1))
assert window.compared.steps == [1, 1] and window.first.step == 1, (window.compared, window.first.step)
assert postmortem.diff("a", "b", steps="1-").compared.steps == [1, 1]
EOF

# bisect: the planted kernel named (exit 0) from the runs given, then exit 1
# from the last diff (identical: nothing to bisect) in that directory.
py <<'EOF'
import json
from dtrace import postmortem
planted = json.load(open("planted.json"))
b = postmortem.bisect("a", "b", trust=True, timeout=60.5)
assert b.argv[-4:] == ["--timeout", "60.5", "--trust", "--json"], b.argv
assert b.exit_status == 0 and b.named and b.verdict == "named", (b.exit_status, b.verdict, b.reached)
assert (b.culprit.op, b.culprit.scope, b.culprit.role) == (planted["op"], planted["scope"], "origin"), b.culprit
assert b.step == b.culprit.step == 0 and b.ranks_replayed == [0, 1]
assert b.evidence.distinct_outputs >= 2 and b.evidence.elements_differing > 0, b.evidence
# Every culprit (schema 1.6): the first is the culprit above, with its evidence; one plant, one culprit.
assert len(b.culprits) == 1 and (b.culprits[0].op, b.culprits[0].scope) == (b.culprit.op, b.culprit.scope), b.culprits
assert b.culprits[0].evidence == b.evidence and b.culprits[0].pinned == [] and b.culprits[0].replays[0] == 0
assert b.search is not None and b.search.stop in ("agree", "no-pins"), b.search
assert len(b.replays) >= 8 and all(r.exit == 0 and r.via in ("launch", "request") for r in b.replays)
assert b.launches and all(0 <= r.launch < len(b.launches) for r in b.replays)
assert b.replay_mode in ("sessions", "launches", "mixed") and "[layer] replaying A" in b.stderr
postmortem.diff("a", "a2")
n = postmortem.bisect(trust=True)
assert n.exit_status == 1 and not n.named and n.culprit is None and n.evidence is None, (n.exit_status, n.verdict)
assert "nothing to bisect" in n.reached, n.reached
EOF

# bisect's fast-forward verdict (exit 1: a step before the one asked for came
# out otherwise from its checkpoint, bisect_fast_forward.sh's runs): nothing
# named, whether the helper ran dtrace or reads its saved document, and a
# saved one said to have exited 0 contradicts its verdict.
mt --steps 5 --level step --nondet splitk --checkpoint-every 2 --checkpoint-dir ck-ffa --out ffa
mt --steps 5 --level step --nondet splitk --checkpoint-every 2 --checkpoint-dir ck-ffb --out ffb
got=0; "$REAL" bisect --trust --json --step 3 ffa ffb >ff.json 2>"$ERR" || got=$?
[ "$got" = 1 ] && [ "$(jq -r .verdict ff.json)" = fast-forward ] || fail "bisect --step 3 ffa ffb ($got): $(cat "$ERR")"
py <<'EOF'
from dtrace import postmortem, DocumentError
b = postmortem.bisect("ffa", "ffb", step=3, trust=True)
assert (b.exit_status, b.named, b.verdict) == (1, False, "fast-forward"), (b.exit_status, b.verdict, b.reached)
assert b.culprit is None and b.state is None and b.input is None and b.departed.step == 2, (b.culprit, b.departed)
saved = postmortem.read("ff.json")
assert (saved.exit_status, saved.named, saved.verdict) == (1, False, "fast-forward"), (saved.exit_status, saved.named)
try:
    postmortem.read("ff.json", exit_status=0)
except DocumentError as e:
    assert "exited 0 with verdict 'fast-forward', which dtrace(1) gives exit status 1" in e.message, e.message
else:
    raise AssertionError("a fast-forward verdict read as exit status 0: no DocumentError")
EOF

# check: certified (exit 0), and a rank's file gone (exit 1, the violation named).
mkdir half && cp a/rank0.jsonl half/
py <<'EOF'
from dtrace import postmortem
c = postmortem.check("a")
assert c.exit_status == 0 and c.certified and c.verdict == "certified" and c.violations == []
assert c.world_size == 2 and c.step_range == [0, 1], (c.world_size, c.step_range)
h = postmortem.check("half")
assert h.exit_status == 1 and not h.certified and h.verdict == "violations"
assert [v.kind for v in h.violations] == ["rank-absent"] and h.violations[0].rank == 1, h.violations
assert h.violation_counts == {"rank-absent": 1} and h.violation_total == 1
EOF

# show: the selected records, as the CLI's document lists them.
py <<'EOF'
import json
from dtrace import postmortem
s = postmortem.show("a", step=1, rank=1)
want = json.load(open("show.json"))
assert s.exit_status == 0 and s.ranks_present == 2 and s.header.level == "step" and s.complete
assert (s.selection.step, s.selection.rank) == (1, 1), s.selection
assert [(r.seq, r.scope, r.op, r.name, r.hash, r.bits, r.location) for r in s.selected] == \
       [(r["seq"], r["scope"], r["op"], r["name"], r.get("hash"), r.get("bits"), r["location"]) for r in want["selected"]]
assert len(s.selected) > 1 and all(r.step == 1 and r.rank == 1 for r in s.selected)
w = postmortem.show("a", steps=(0, 0))
assert w.selection.steps == [0, 0] and {r.step for r in w.selected} == {0}, w.selection
assert {r.rank for r in w.selected} == {0, 1}
EOF

# read: documents saved from the CLI, typed as the helpers type them, the exit
# status the one dtrace(1) gives their verdict, or the one given.
echo '{"schema": "dtrace-diff",' >cut.json
py <<'EOF'
import dataclasses, json
from dtrace import postmortem, DocumentError
d = postmortem.read("diff.json")
assert d == dataclasses.replace(postmortem.diff("a", "b"), argv=[], stderr=""), d
assert d.diverged and d.exit_status == 1 and d.argv == [] and d.validated_against.endswith("dtrace-diff-1.schema.json")
b = postmortem.read("bisect.json")
assert isinstance(b, postmortem.Bisect) and b.named and b.culprit.op == json.load(open("planted.json"))["op"]
s = postmortem.read(json.load(open("show.json")))
assert isinstance(s, postmortem.Show) and s.exit_status == 0 and s.selection.step == 1
later = dict(json.load(open("diff.json")), verdict="diverged-somehow")
for source, status, says in (("cut.json", None, "cut.json: not a JSON document"),
                             (dict(later, schema="dtrace-env"), None, "names schema 'dtrace-env'"),
                             (later, None, "verdict 'diverged-somehow'"),
                             ("diff.json", 0, "diff.json: exited 0 with verdict 'diverged'")):
    try:
        postmortem.read(source, exit_status=status)
    except DocumentError as e:
        assert says in e.message, (says, e.message)
    else:
        raise AssertionError(f"read {says}: no DocumentError")
try:
    postmortem.read("diff.json", exit_status=2)     # trouble prints no document
except ValueError as e:
    assert "0 or 1" in str(e), e
else:
    raise AssertionError("read with exit status 2: no ValueError")
EOF

# Exit status 2: CommandError with dtrace's message, naming the file and line,
# or a crashed replay's stderr tail after it (not bisect's progress before it).
printf '#!/bin/sh\necho "the replay broke" >&2\necho "at its last line" >&2\nexit 3\n' >crash.sh
chmod +x crash.sh
mkdir bad && cp a/rank1.jsonl bad/ && { sed -n 1,2p a/rank0.jsonl; echo '{"step":0,"rank":0,'; sed -n '3,$p' a/rank0.jsonl; } >bad/rank0.jsonl
py <<'EOF'
from dtrace import postmortem, CommandError, Error
for call, where in ((lambda: postmortem.diff("a", "missing"), "missing"),
                    (lambda: postmortem.diff("a", "bad"), "bad/rank0.jsonl:3"),
                    (lambda: postmortem.check("bad"), "bad/rank0.jsonl:3"),
                    (lambda: postmortem.bisect("a", "b"), "--trust"),
                    (lambda: postmortem.bisect("a", "b", replay="./crash.sh"), "exit 3; its stderr ends with:\n"
                                                                               "the replay broke\nat its last line")):
    try:
        call()
    except CommandError as e:
        assert isinstance(e, Error) and e.exit_status == 2, e.exit_status
        assert e.message.startswith("dtrace: error:") and where in e.message, e.message
        assert str(e) == e.message and e.stderr.rstrip().endswith(e.message) and "info:" not in e.message
    else:
        raise AssertionError(f"no CommandError naming {where}")
EOF

# Interrupted (KeyboardInterrupt: a notebook's interrupt signals the Python
# alone), the helper stops dtrace so that dtrace ends its replay, and the
# interruption goes on: no replay is left running.
printf '#!/bin/sh\necho $$ >"%s/hang.pid"\nexec sleep 300\n' "$WORK" >hang.sh
chmod +x hang.sh
# A background job of a script starts with SIGINT ignored: Python's handler back.
"$PY" - >interrupted.out 2>&1 <<'EOF' &
import signal
signal.signal(signal.SIGINT, signal.default_int_handler)
from dtrace import postmortem
try:
    postmortem.bisect("a", "b", replay="./hang.sh")
except KeyboardInterrupt:
    print("interrupted")
EOF
py_pid=$!
waited=0
while [ ! -s hang.pid ]; do
  [ "$waited" -lt 600 ] || fail "the replay did not start within 30 s"
  sleep 0.05
  waited=$((waited + 1))
done
kill -INT "$py_pid"
wait "$py_pid" || fail "the interrupted Python exited $?: $(cat interrupted.out)"
grep -qx interrupted interrupted.out || fail "no KeyboardInterrupt: $(cat interrupted.out)"
stat=$(cat "/proc/$(cat hang.pid)/stat" 2>/dev/null) && case "${stat##*) }" in Z*) ;; *)
  kill "$(cat hang.pid)"; fail "the replay (pid $(cat hang.pid)) outlived the interrupted bisect" ;; esac

# Which dtrace runs: the argument, else DTRACE, else the package's own; one
# that cannot run raises. Each wrapper logs its name, then runs the real one.
mkdir -p bin prefix/bin prefix/share/dtrace
for w in bin/by-arg bin/by-env prefix/bin/dtrace; do
  printf '#!/bin/sh\necho %s >>"%s/called"\nexec "%s" "$@"\n' "$w" "$WORK" "$REAL" >"$w"
  chmod +x "$w"
done
# The schema beside a binary validates its documents, before the package's own:
# this one allows only "identical", so the wrapper's diverged diff is refused.
jq '.properties.verdict.enum = ["identical"]' "$SOURCE_ROOT/schemas/dtrace-diff-1.schema.json" \
  >prefix/share/dtrace/dtrace-diff-1.schema.json
py <<'EOF'
import os
from dtrace import postmortem, CommandError, DocumentError
called = lambda: open("called").read().split()
os.environ["DTRACE"] = os.path.abspath("bin/by-env")
postmortem.check("a", dtrace="bin/by-arg")
assert called() == ["bin/by-arg"], called()
c = postmortem.check("a")
assert called() == ["bin/by-arg", "bin/by-env"] and c.argv[0].endswith("bin/by-env"), called()
del os.environ["DTRACE"]
try:
    postmortem.check("a", dtrace="bin/none")
except CommandError as e:
    assert e.exit_status is None and "bin/none" in e.message, e.message
else:
    raise AssertionError("a dtrace that cannot run raised nothing")
same = postmortem.diff("a", "a2", dtrace="prefix/bin/dtrace")
assert same.validated_against == os.path.abspath("prefix/share/dtrace/dtrace-diff-1.schema.json"), \
    same.validated_against
try:
    postmortem.diff("a", "b", dtrace="prefix/bin/dtrace")
except DocumentError as e:
    assert "prefix/share/dtrace/dtrace-diff-1.schema.json" in e.message and "verdict" in e.message, e.message
else:
    raise AssertionError("the schema beside the binary was not the one used")
EOF

# Documents a newer or another dtrace might print: a later minor version's
# fields are kept in `extra` (top level and nested), a new major version and a
# document that breaks the schema are refused, and so is a verdict that
# contradicts the exit status. EDIT is a jq filter the wrapper applies; STATUS
# the status it exits with (dtrace's when empty).
cat >bin/edit <<EOF
#!/bin/sh
"$REAL" "\$@" >"$WORK/real.json"; status=\$?
jq -c "\$EDIT" "$WORK/real.json" || exit 3
exit \${STATUS:-\$status}
EOF
chmod +x bin/edit
cat >compat.py <<'EOF'
import os, sys
if sys.argv[1:] == ["without-jsonschema"]:
    sys.modules["jsonschema"] = None      # import jsonschema raises ImportError
from dtrace import postmortem, DocumentError
def run(edit, status="", runs=("a", "b")):
    os.environ["EDIT"], os.environ["STATUS"] = edit, status
    return postmortem.diff(*runs, dtrace="bin/edit")
def refused(edit, status="", runs=("a", "b"), says=()):
    try:
        run(edit, status, runs)
    except DocumentError as e:
        assert all(s in e.message for s in says) and "bin/edit diff" in e.message, (edit, e.message)
    else:
        raise AssertionError(f"{edit!r} (exit {status or 'as dtrace'}) was not refused")
newer = run('.schema_version = "1.99" | .coverage = {"ranks": 2} | .first.provenance = "x" '
            '| .ranks[0].provenance = "y" | .compared.bytes = 7')
assert newer.diverged and newer.schema_version == "1.99" and newer.extra == {"coverage": {"ranks": 2}}, newer.extra
assert newer.first.extra == {"provenance": "x"} and newer.ranks[0].extra == {"provenance": "y"}
assert newer.compared.extra == {"bytes": 7} and newer.first.step == run(".").first.step
# A field the schema does not require may be absent (here a record's dtype).
assert run(".").first.a.dtype is not None and run("del(.first.a.dtype)").first.a.dtype is None
refused('.schema_version = "2.0"', says=("version '2.0'", "dtrace-diff 1.x"))
refused('.schema = "dtrace-show"', says=("'dtrace-show'",))
refused("del(.compared)", says=("compared",))
refused('.first.step = "zero"', says=("first", "step"))
refused(".", status="0", says=("exited 0 with verdict 'diverged'", "exit status 1"))
refused(".", status="1", runs=("a", "a2"), says=("exited 1 with verdict 'identical'",))
refused('"not an object"', says=("not an object",))
if sys.argv[1:] == ["without-jsonschema"]:
    # A verdict a later minor version adds: its exit status says what it means
    # (with jsonschema, this package's schema refuses it: a newer dtrace's is
    # installed beside it and used instead).
    later = run('.verdict = "diverged-somehow"')
    assert later.diverged and later.verdict == "diverged-somehow"
print("validated_against", newer.validated_against)
EOF
"$PY" compat.py >compat.out 2>&1 || { cat compat.out >&2; fail "the checks with jsonschema"; }
grep -qx "validated_against $SOURCE_ROOT/schemas/dtrace-diff-1.schema.json" compat.out ||
  fail "jsonschema did not validate the newer document"
# Without jsonschema: not validated as a whole, every field read still checked.
"$PY" compat.py without-jsonschema >compat.out 2>&1 || { cat compat.out >&2; fail "the checks without jsonschema"; }
grep -q "validated_against None" compat.out || fail "without jsonschema: $(cat compat.out)"

# docs/python.md's example script, as written there: exit 1 naming the planted
# kernel, 0 on identical runs, 2 with dtrace's message on a missing run.
awk '/<!-- nightly.py/ {f = 1; next} f && /^```python/ {g = 1; next} g && /^```/ {exit} g' \
  "$SOURCE_ROOT/docs/python.md" >nightly.py
[ -s nightly.py ] || fail "no nightly.py in docs/python.md"
got=0; "$PY" nightly.py a b >nightly.out 2>&1 || got=$?
[ "$got" = 1 ] || { cat nightly.out >&2; fail "nightly.py a b exited $got"; }
grep -qx "culprit: $(jq -r '.scope + " " + .op' planted.json) at step 0, rank 0 (confirmed)" nightly.out &&
  grep -qx "diverged at step 0, rank 0: $(jq -r '.first | "\(.scope) \(.op) \(.name) (\(.role))"' diff.json)" nightly.out ||
  fail "nightly.py a b: $(cat nightly.out)"
got=0; "$PY" nightly.py a a2 >nightly.out 2>&1 || got=$?
[ "$got" = 0 ] && grep -qx "identical over steps 0-1, 2 ranks" nightly.out || fail "nightly.py a a2 ($got): $(cat nightly.out)"
got=0; "$PY" nightly.py a missing >nightly.out 2>&1 || got=$?
[ "$got" = 2 ] && grep -q "^cannot compare: dtrace: error: missing: " nightly.out || fail "nightly.py a missing ($got): $(cat nightly.out)"

# As `meson install` leaves it: beside dtrace_torch, its _paths.py naming the
# installed dtrace and schemas, and (relocated, as a DESTDIR package is) it
# imports and runs the dtrace it is given.
meson install -C "$BUILD_ROOT" --destdir "$WORK/root" --no-rebuild --quiet >/dev/null || fail "meson install"
site="$WORK/root$PYTHON_DIR"
[ -f "$site/dtrace/postmortem.py" ] && [ -f "$site/dtrace_torch/__init__.py" ] || fail "dtrace not installed in $PYTHON_DIR"
grep -qx "DTRACE = \"$PREFIX/bin/dtrace\"" "$site/dtrace/_paths.py" &&
  grep -qx "SCHEMAS = \"$PREFIX/share/dtrace\"" "$site/dtrace/_paths.py" || fail "installed _paths.py: $(cat "$site/dtrace/_paths.py")"
[ -f "$WORK/root$PREFIX/share/dtrace/dtrace-bisect-1.schema.json" ] || fail "no installed schemas"
PYTHONPATH="$site" "$PY" - "$site" <<'EOF' || fail "the installed package"
import sys
from dtrace import postmortem
assert postmortem.__file__.startswith(sys.argv[1]), postmortem.__file__
assert postmortem.check("a", dtrace="bin/by-arg").certified
EOF
# tools/test.sh's second pass: its Python reads the documents saved above
# (diff's, and a bisect's) through the helpers, from a stand-in dtrace that
# prints one and exits as dtrace did; and dtrace's trouble as CommandError.
if [ -n "${TORCH_PYTHON:-}" ]; then
  printf '#!/bin/sh\n[ -z "$SAVED" ] || cat "$SAVED"\n[ -z "$SAYS" ] || echo "$SAYS" >&2\nexit "$STATUS"\n' >bin/saved
  chmod +x bin/saved
  "$TORCH_PYTHON" - <<'EOF' || fail "$TORCH_PYTHON: the helpers on saved documents"
import json, os, sys
from dtrace import postmortem, CommandError
try:
    import jsonschema
    schemas = os.path.join(os.environ["SOURCE_ROOT"], "schemas")
except ImportError:
    schemas = None
def saved(name, status, says=""):
    os.environ.update(SAVED=name, STATUS=str(status), SAYS=says)
saved("diff.json", 1)
d = postmortem.diff("a", "b", dtrace="bin/saved")
want = json.load(open("diff.json"))
assert d.diverged and (d.first.step, d.first.rank, d.first.scope) == \
       (want["first"]["step"], want["first"]["rank"], want["first"]["scope"]), d.first
assert d.validated_against == (schemas and os.path.join(schemas, "dtrace-diff-1.schema.json"))
saved("bisect.json", 0)
b = postmortem.bisect("a", "b", trust=True, dtrace="bin/saved")
want = json.load(open("bisect.json"))
assert b.named and b.culprit.op == want["culprit"]["op"] and len(b.replays) == len(want["replays"])
ff = postmortem.read("ff.json")
assert (ff.exit_status, ff.named, ff.verdict) == (1, False, "fast-forward"), (ff.exit_status, ff.verdict)
saved("", 2, "dtrace: error: a/rank0.jsonl:3: not JSON")
try:
    postmortem.check("a", dtrace="bin/saved")
except CommandError as e:
    assert e.exit_status == 2 and e.message == "dtrace: error: a/rank0.jsonl:3: not JSON", e.message
else:
    raise AssertionError("exit 2 raised nothing")
print("Python", sys.version.split()[0], "read the saved documents")
EOF
fi
echo ok
