# json_valid SCHEMA FILE: the JSON document in FILE names SCHEMA (dtrace-diff,
# ...) and major version 1, and is valid against schemas/SCHEMA-1.schema.json,
# the file installed in share/dtrace/ (man/dtrace.1, JSON OUTPUT). Sourced by
# lib.sh and minitrain-lib.sh, whose helpers call it on every --json document
# dtrace prints, so every e2e test that reads a field also checks the whole
# contract. Debian's python3 has jsonschema (tools/setup-deps.sh); the python3
# first on PATH may not. Calls `fail` (the sourcing file's) when it does not hold.
SCHEMAS=${SCHEMAS:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../../schemas" && pwd)}
json_valid() {
  /usr/bin/python3 -c '
import json, sys, jsonschema
doc, name = json.load(open(sys.argv[1])), sys.argv[2]
schema = json.load(open(sys.argv[3]))
got = (doc.get("schema"), doc.get("schema_version"))
if got[0] != name or not str(got[1]).startswith("1."):
    sys.exit(f"names schema {got[0]!r} version {got[1]!r}, expected {name} 1.x")
errors = sorted(jsonschema.Draft202012Validator(schema).iter_errors(doc), key=lambda e: list(e.path))
for e in errors[:5]:
    print("/".join(map(str, e.path)) or "(document)", ":", e.message[:300], file=sys.stderr)
sys.exit(1 if errors else 0)
' "$2" "$1" "$SCHEMAS/$1-1.schema.json" || fail "the JSON document does not follow the $1 schema"
}
