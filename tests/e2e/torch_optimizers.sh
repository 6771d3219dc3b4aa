#!/usr/bin/env bash
# The optimizer's state is recorded whatever the optimizer keeps in it: plain
# SGD keeps momentum_buffer None (dtrace_torch raised "Could not infer dtype of
# NoneType" at the second step), SGD with momentum a tensor, Adam tensors and a
# step count. Each leaf by the state_dict rule (records.state_values): None
# holds nothing and is left out.
. "$(dirname "$0")/torch-lib.sh"
"$PYTHON" - <<'PY' || fail "optimizer state"
import json, torch, dtrace_torch as dt
torch.manual_seed(0)
cases = {
    "sgd": lambda p: torch.optim.SGD(p, lr=0.1),
    "momentum": lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
    "adam": lambda p: torch.optim.Adam(p, lr=0.1),
}
for name, make in cases.items():
    model = torch.nn.Linear(2, 2)
    opt = make(model.parameters())
    rec = dt.Recorder(model, opt, run_dir=name)
    for step in rec.steps(3):
        with rec.step(step):
            loss = model(torch.ones(1, 2)).sum()
            loss.backward()
            opt.step()
            opt.zero_grad()
            rec.metric("loss", loss)
    rec.close()
    lines = [json.loads(l) for l in open(f"{name}/rank0.jsonl")][1:]
    ends = [l for l in lines if l.get("end")]
    assert len(ends) == 3, (name, ends)
    optim = sorted({l["name"] for l in lines if l.get("op") == "optim" and l["step"] == 2})
    want = {
        "sgd": [],
        "momentum": ["bias.momentum_buffer", "weight.momentum_buffer"],
        "adam": ["bias.exp_avg", "bias.exp_avg_sq", "bias.step", "weight.exp_avg", "weight.exp_avg_sq", "weight.step"],
    }[name]
    assert optim == want, (name, optim)
PY
echo ok
