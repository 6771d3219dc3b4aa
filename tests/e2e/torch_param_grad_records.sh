#!/usr/bin/env bash
# Layer-level records of each module's contribution to its own parameters'
# gradients (docs/torch.md, "What is recorded"): in the module's bwd/<module>
# scope, out param_grad.<name>, one record per use, as the node that used the
# parameter ran, never the summed .grad. Checked against gradients computed
# apart, with an untied copy of the model (one parameter per use), for:
# - tied weights: the embedding's and the head's uses of one parameter, each in
#   its own module's scope;
# - a parameter used twice in one call: param_grad.weight and param_grad.weight#2;
# - gradient accumulation: each micro-batch's backward is its own occurrence;
# - DistributedDataParallel over two ranks: what the rank computed, before the
#   reducer's all-reduce (the step-level grads record is the reduced gradient);
# - the isolated backward of bwd/twice (DTRACE_ISOLATE) records what the layer
#   level recorded, use by use and call by call.
. "$(dirname "$0")/torch-lib.sh"
cat >record.py <<'PY'
import json, os, sys
import torch
import dtrace_torch as dt
from dtrace import capi as _lib

world = int(os.environ.get("WORLD_SIZE", "1"))
rank = int(os.environ.get("RANK", "0"))
if world > 1:
    torch.distributed.init_process_group("gloo")


class Twice(torch.nn.Module):
    """One weight used twice in one call; untied, two weights (a: inner, b: outer)."""

    def __init__(self, tied):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(8, 8) / 3)
        self.b = self.weight if tied else torch.nn.Parameter(self.weight.detach().clone())

    def forward(self, x):
        return torch.tanh(x @ self.weight) @ self.b


class Tiny(torch.nn.Module):
    def __init__(self, tied):
        super().__init__()
        self.embed = torch.nn.Embedding(16, 8)
        self.mix = torch.nn.Linear(8, 8)
        self.twice = Twice(tied)
        self.head = torch.nn.Linear(8, 16, bias=False)
        if tied:
            self.head.weight = self.embed.weight

    def forward(self, idx):
        x = torch.tanh(self.mix(self.embed(idx))).reshape(-1, 8)
        return self.head(self.twice(x)).logsumexp(-1).mean()


torch.manual_seed(0)
model = Tiny(True)
untied = Tiny(False)
with torch.no_grad():
    untied.embed.weight.copy_(model.embed.weight)
    untied.head.weight.copy_(model.embed.weight)
    untied.mix.weight.copy_(model.mix.weight)
    untied.mix.bias.copy_(model.mix.bias)
    untied.twice.weight.copy_(model.twice.weight)
    untied.twice.b.copy_(model.twice.weight)
g = torch.Generator()
g.manual_seed(100 + rank)
micro = [torch.randint(0, 16, (2, 6), generator=g) for _ in range(2)]

# What each use contributed, micro-batch by micro-batch, from the untied copy.
want = {}
for idx in micro:
    untied.zero_grad(set_to_none=True)
    untied(idx).backward()
    for key, p in [(("bwd/embed", "param_grad.weight"), untied.embed.weight),
                   (("bwd/head", "param_grad.weight"), untied.head.weight),
                   (("bwd/mix", "param_grad.weight"), untied.mix.weight),
                   (("bwd/mix", "param_grad.bias"), untied.mix.bias),
                   (("bwd/twice", "param_grad.weight"), untied.twice.b),    # the outer use: found first
                   (("bwd/twice", "param_grad.weight#2"), untied.twice.weight)]:
        t = p.grad.contiguous()
        want.setdefault(key, []).append("%016x" % _lib.fingerprint_host(t.data_ptr(), t.numel() * t.element_size()))

net = model
if world > 1:
    net = torch.nn.parallel.DistributedDataParallel(model)
opt = torch.optim.SGD(net.parameters(), lr=0.1)
rec = dt.Recorder(net, opt, run_dir="run", checkpoint_dir="ckpt", level="layer")
for step in rec.steps(1):
    with rec.step(step):
        for idx in micro:  # gradient accumulation: two backwards, one optimizer step
            net(idx).backward()
        opt.step()
        opt.zero_grad()

prefix = "bwd/module." if world > 1 else "bwd/"
got, grads = {}, {}
for line in open(f"run/rank{rank}.jsonl"):
    r = json.loads(line)
    if r.get("name", "").startswith("param_grad."):
        assert r["io"] == "out" and r["op"] in ("Embedding", "Linear", "Twice"), r
        got.setdefault(("bwd/" + r["scope"][len(prefix):], r["name"]), []).append(r["hash"])
    if r.get("op") == "grads":
        grads[r["name"]] = r["hash"]
assert got == want, (sorted(got.items()), sorted(want.items()))
print(json.dumps({"rank": rank, "embed_contribution": got[("bwd/embed", "param_grad.weight")],
                  "grads": grads}))
PY
"$PYTHON" record.py >"$OUT" 2>"$ERR" || { cat "$ERR" >&2; fail "one process: the recorded contributions"; }

# The module's backward alone, from a capture of its scope: the same records.
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=layer DTRACE_SCOPE=bwd/twice DTRACE_CAPTURE=cap DTRACE_OUT=capture.jsonl \
  "$PYTHON" record.py >/dev/null 2>"$ERR" || { cat "$ERR" >&2; fail "capture of bwd/twice"; }
DTRACE_REPLAY_STEP=0 DTRACE_LEVEL=layer DTRACE_SCOPE=bwd/twice DTRACE_ISOLATE=bwd/twice DTRACE_INPUTS=cap \
  DTRACE_REPEAT=1 DTRACE_OUT=isolated.jsonl "$PYTHON" record.py >/dev/null 2>"$ERR" \
  || { cat "$ERR" >&2; fail "isolation of bwd/twice"; }
"$PYTHON" - <<'PY' || fail "the isolated backward of bwd/twice against the layer level's records"
import json
def grads(path):
    out = {}
    for line in open(path):
        r = json.loads(line)
        if r.get("scope") == "bwd/twice" and r["name"].startswith("param_grad."):
            out.setdefault(r["name"], []).append(r["hash"])
    return out
layer, isolated = grads("capture.jsonl"), grads("isolated.jsonl")
assert sorted(layer) == ["param_grad.weight", "param_grad.weight#2"] and len(layer["param_grad.weight"]) == 2, layer
assert isolated == layer, (isolated, layer)
PY

# Two ranks under DistributedDataParallel, each with its own batches.
rm -rf run
port=$(free_port)
for k in 0 1; do
  RANK=$k LOCAL_RANK=$k WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
    "$PYTHON" record.py >"$WORK/ddp$k.out" 2>"$WORK/ddp$k.err" &
  pids[$k]=$!
done
for k in 0 1; do
  wait "${pids[$k]}" || { cat "$WORK/ddp$k.err" >&2; fail "DDP rank $k: the recorded contributions"; }
done
"$PYTHON" - "$WORK/ddp0.out" "$WORK/ddp1.out" <<'PY' || fail "DDP: contributions against the reduced gradients"
import json, sys
r0, r1 = (json.load(open(p)) for p in sys.argv[1:])
# The ranks computed different contributions; the optimizer saw one reduced gradient.
assert r0["embed_contribution"] != r1["embed_contribution"], (r0, r1)
assert r0["grads"] == r1["grads"] and r0["grads"], (r0["grads"], r1["grads"])
PY
echo ok
