#!/bin/bash
# Every --json document names its contract ("schema", "schema_version") and
# follows the JSON Schema shipped for it (schemas/, installed in share/dtrace/;
# man dtrace(1), JSON OUTPUT). run_dtrace validates each document below (and
# in every other e2e test); this test covers each command without a replay,
# checks that every shipped schema is a valid draft 2020-12 schema, and that
# the schemas can fail: a document with a field missing, of another type, or
# with a verdict that is not in the contract is rejected.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/diff
C=$TESTDATA/check

run_dtrace 0 diff --json "$D/identical/a" "$D/identical/b"
json_is schema '"dtrace-diff"'
json_is schema_version '"1.1"'
run_dtrace 1 diff --json "$D/origin_beats_receiver/a" "$D/origin_beats_receiver/b"
run_dtrace 1 diff --json "$D/signed_zero/a" "$D/signed_zero/b"
json_true '"ulp" in d["first"]'
run_dtrace 0 diff --json "$D/env_difference/a" "$D/env_difference/b"
json_true 'len(d["header_differences"]) > 0 and len(d["env_flags"]) > 0'
run_dtrace 1 diff --json "$D/origin_beats_receiver/a" "$D/origin_beats_receiver/b"
cp "$OUT" diverged.json

run_dtrace 0 show --json "$C/clean"
json_is schema '"dtrace-show"'
run_dtrace 0 show --json --rank 1 --step 0 "$C/rank_absent"
json_true 'len(d["selected"]) > 0'
run_dtrace 0 show --json "$C/incomplete"

run_dtrace 0 check --json "$C/clean"
json_is schema '"dtrace-check"'
for v in duplicate_seq incomplete late header_mismatch rank_absent; do
  run_dtrace 1 check --json "$C/$v"
  json_is verdict '"violations"'
done

run_dtrace 0 env --json
json_is schema '"dtrace-env"'
NCCL_ALGO=Tree run_dtrace 0 env --json
json_is valid false
json_is exports null

# Every shipped schema is itself valid, and names the schema its documents carry.
/usr/bin/python3 - "$SCHEMAS" <<'PY' || fail "a shipped schema is not a valid JSON Schema"
import json, sys, pathlib, jsonschema
files = sorted(pathlib.Path(sys.argv[1]).glob("*.schema.json"))
names = {f.name for f in files}
want = {f"dtrace-{c}-1.schema.json" for c in ["diff", "bisect", "show", "check", "env", "verify", "tax", "replicas", "watch"]}
if names != want:
    sys.exit(f"schemas shipped: {sorted(names)}, expected {sorted(want)}")
for f in files:
    schema = json.load(open(f))
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema"]["const"] == f.name.removesuffix("-1.schema.json"), f
PY

# The schemas can fail: each broken copy of the diverged diff must be rejected.
rejected() {
  /usr/bin/python3 -c '
import json, sys
d = json.load(open("diverged.json"))
exec(sys.argv[1])
json.dump(d, open("broken.json", "w"))
' "$1"
  if (fail() { exit 1; }; json_valid dtrace-diff broken.json) 2>/dev/null; then
    fail "the diff schema accepts a document where: $1"
  fi
}
( fail() { exit 1; }; json_valid dtrace-diff diverged.json ) || fail "the unbroken copy is rejected"
rejected 'del d["verdict"]'
rejected 'd["verdict"] = "similar"'
rejected 'd["schema"] = "dtrace-bisect"'
rejected 'd["schema_version"] = "2.0"'
rejected 'del d["schema_version"]'
rejected 'd["first"]["role"] = "culprit"'
rejected 'd["first"]["step"] = "0"'
rejected 'd["compared"]["records"] = 1.5'
rejected 'd["ranks"] = {}'
rejected 'del d["first"]["occurrence"]'
# A field the contract does not list yet is allowed (a later minor version).
/usr/bin/python3 -c '
import json
d = json.load(open("diverged.json")); d["added_later"] = {"x": 1}; d["first"]["added_later"] = 2
json.dump(d, open("extended.json", "w"))'
( fail() { exit 1; }; json_valid dtrace-diff extended.json ) || fail "an added field is rejected"
echo ok
