#!/usr/bin/env bash
# Without switches the example is deterministic: two runs recorded at kernel
# level (every ATen op's inputs and outputs) are identical, and each record of
# the header's config names the torch version.
. "$(dirname "$0")/torch-lib.sh"
ex --steps 2 --level kernel --run-dir a
ex --steps 2 --level kernel --run-dir b
run_dtrace 0 check a
run_dtrace 0 diff --json a b
json_is verdict '"identical"'
json_true 'any(n.startswith("searched by chained step digests") for n in d["notes"])'
# --stream reads (and counts) every record.
run_dtrace 0 diff --stream --json a b
json_is verdict '"identical"'
json_true 'd["compared"]["records"] > 1000'
grep -q '"op":"aten.mm.default"' a/rank0.jsonl || fail "no aten.mm.default record at kernel level"
grep -q '"scope":"fwd/blocks.1.moe.experts.0.up"' a/rank0.jsonl || fail "no module scope in the kernel records"
# Every end record carries its chain and its own line number (dtrace-fp(5)),
# written by libdtrace's recorder under the C API the package calls.
python3 - a/rank0.jsonl <<'PY' || fail "end records without chain or with a wrong line"
import json, sys
ends = [(n, json.loads(l)) for n, l in enumerate(open(sys.argv[1]), 1) if '"end":true' in l]
sys.exit(not ends or any("chain" not in e or e.get("line") != n for n, e in ends))
PY
grep -q '"torch":' a/rank0.jsonl || fail "the header's config lacks the torch version"
echo ok
