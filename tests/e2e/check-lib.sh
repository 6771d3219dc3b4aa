# Helpers for the check_* tests that lay a valid run out anew (dtrace-fp(5):
# records may sit in any file and any line order): a rank's steps moved to
# other files, in another order, written twice. Sources lib.sh.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

# relayout SRC DEST STEP...: writes DEST with SRC's header, then each STEP's
# lines of SRC (its records and its end record, as SRC has them) in the order
# given; a STEP may repeat. Each end record's `line` is set to the line it is
# now on, so only what the test means to change changes; the header's `rank`
# declaration is dropped, as the lines may no longer be one rank in step order.
relayout() {
  python3 - "$@" <<'PY' || fail "relayout $*"
import json, re, sys
src, dest, order = sys.argv[1], sys.argv[2], [int(s) for s in sys.argv[3:]]
lines = open(src).read().splitlines()
steps = {}
for line in lines[1:]:
    steps.setdefault(json.loads(line)["step"], []).append(line)
# Another writer's layout: the header no longer declares one rank in step
# order (field `rank`, dtrace-fp(5)), which the reader would hold it to.
out = [re.sub(r',"rank":[0-9]+', '', lines[0])]
for s in order:
    for line in steps[s]:
        out.append(re.sub(r'"line":[0-9]+', '"line":%d' % (len(out) + 1), line))
open(dest, "w").write("\n".join(out) + "\n")
PY
}

# alter FILE STEP: changes the bits of step STEP's loss in FILE, its chain
# kept: a record that is not what its end record's chain digests.
alter() {
  python3 - "$1" "$2" <<'PY' || fail "alter $*"
import json, re, sys
path, step = sys.argv[1], int(sys.argv[2])
lines = open(path).read().splitlines()
for i, line in enumerate(lines):
    if i and '"loss"' in line and json.loads(line).get("step") == step:
        lines[i] = re.sub(r'"bits":"([0-9a-f]*)[0-9a-f]"', lambda m: '"bits":"%s%s"' % (m.group(1), "0" if line[m.end() - 2] != "0" else "1"), line)
        break
else:
    sys.exit("no loss of step %d in %s" % (step, path))
open(path, "w").write("\n".join(lines) + "\n")
PY
}
