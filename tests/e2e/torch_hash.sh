#!/usr/bin/env bash
# A tensor recorded through dtrace_torch carries the fingerprint `dtrace hash`
# gives its bytes in logical order: a transposed (non-contiguous) f32 tensor, a
# bf16 one, an empty one, and two whose bits torch resolves lazily (a conjugated
# complex tensor and a negated view, both contiguous: only their conjugation and
# negation bits tell them from their bases), each written out contiguously with
# those bits resolved and hashed by dtrace.
. "$(dirname "$0")/torch-lib.sh"
cat >record.py <<'PY'
import sys, torch, dtrace_torch as dt
model = torch.nn.Linear(2, 2)
tensors = {"t": torch.arange(12, dtype=torch.float32).reshape(3, 4).t(),
           "b": torch.linspace(-3, 3, 70000).to(torch.bfloat16), "e": torch.zeros(0, 5),
           "c": torch.tensor([1 + 2j, 3 - 4j], dtype=torch.complex64).conj(),
           "n": torch._neg_view(torch.arange(1, 5, dtype=torch.float32))}
rec = dt.Recorder(model, run_dir="run")
for step in rec.steps(1):
    with rec.step(step):
        rec.record("probe", tensors)
for name, t in tensors.items():
    t.resolve_conj().resolve_neg().contiguous().numpy().tofile(name + ".bin") if t.dtype != torch.bfloat16 else \
        open(name + ".bin", "wb").write(bytes(t.contiguous().view(torch.int16).numpy().tobytes()))
PY
"$PYTHON" record.py 2>"$WORK/example.err" || { cat "$WORK/example.err"; fail "record.py"; }
for name in t b e c n; do
  want=$("$DTRACE" hash "$name.bin" | cut -d' ' -f1)
  got=$(python3 -c '
import json, sys
for line in open("run/rank0.jsonl"):
    r = json.loads(line)
    if r.get("op") == "probe" and r.get("name") == sys.argv[1]:
        print(r["hash"])' "$name")
  [ -n "$got" ] && [ "$got" = "$want" ] || fail "tensor $name: recorded $got, dtrace hash $want"
done
grep -q '"name":"b","dtype":"bf16","shape":\[70000\]' run/rank0.jsonl || fail "bf16 record lacks dtype or shape"
echo ok
