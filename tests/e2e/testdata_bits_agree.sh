#!/bin/bash
# Every scalar in the shipped runs (testdata/*) carries a `value` that is what
# its `bits` hold, as a recorder writes them (man/dtrace-fp.5): hand-made
# fixtures whose bits and values disagree would teach readers the wrong thing.
. "$(dirname "$0")/lib.sh"
python3 - "$TESTDATA" >"$OUT" <<'PY' || fail "scalars whose bits and value disagree"
import json, math, pathlib, struct, sys
formats = {"f32": (">f", ""), "f64": (">d", ""), "f16": (">e", ""), "bf16": (">f", "0000")}
checked, bad = 0, []
for f in sorted(pathlib.Path(sys.argv[1]).rglob("*.jsonl")):
    for n, line in enumerate(f.read_bytes().split(b"\n"), 1):
        try:
            r = json.loads(line)
        except ValueError:
            continue  # the malformed and cut lines some fixtures hold on purpose
        if not isinstance(r, dict) or "bits" not in r or "value" not in r:
            continue
        if r.get("dtype") not in formats:
            continue
        fmt, pad = formats[r["dtype"]]
        held = struct.unpack(fmt, bytes.fromhex(r["bits"] + pad))[0]
        value = r["value"]
        nan = math.isnan(held) and (value is None or (isinstance(value, float) and math.isnan(value)))
        checked += 1
        if not nan and held != value:
            bad.append(f"{f}:{n}: bits {r['bits']} hold {held!r}, value says {value!r}")
print(f"{checked} scalars checked")
if bad or checked == 0:
    print("\n".join(bad[:10]))
    sys.exit(1)
PY
cat "$OUT"
echo ok
