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

# Where the recorder meets the optimizer's step: the gradients as it sees them
# (step grads) and its kernels in scope opt, with an LR scheduler made before
# the Recorder (schedulers wrap the optimizer's step and check, at their first
# step, that the step is still their wrapper). torch 2.x: the optimizer's step
# hooks leave the step alone, so the scheduler does not warn that the step was
# "overridden after learning rate scheduler initialization", and close() leaves
# the scheduler's wrapper in place. torch 1.13 has no step hooks: the bound
# method is wrapped (and the scheduler warns).
"$PYTHON" - <<'PY' || fail "the optimizer's step hooks"
import json, warnings, torch, dtrace_torch as dt
torch.manual_seed(0)
model = torch.nn.Linear(2, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
sched = torch.optim.lr_scheduler.StepLR(opt, 1)
rec = dt.Recorder(model, opt, run_dir="sched", level="kernel")
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    for step in rec.steps(2):
        with rec.step(step):
            model(torch.ones(1, 2)).sum().backward()
            opt.step()
            sched.step()
            opt.zero_grad()
lines = [json.loads(l) for l in open("sched/rank0.jsonl")][1:]
for step in (0, 1):
    grads = sorted(l["name"] for l in lines if l.get("op") == "grads" and l["step"] == step)
    assert grads == ["bias", "weight"], (step, grads)
    opt_seqs = [l["seq"] for l in lines if l.get("scope") == "opt" and l["step"] == step]
    assert opt_seqs, f"step {step}: no kernel of the optimizer in scope opt"
    # The gradients are recorded before the optimizer's own kernels run.
    assert all(l["seq"] < min(opt_seqs) for l in lines if l.get("op") == "grads" and l["step"] == step)
assert abs(sched.get_last_lr()[0] - 1e-3) < 1e-12, sched.get_last_lr()  # it stepped twice
if hasattr(opt, "register_step_pre_hook"):
    overridden = [str(w.message) for w in caught if "overridden" in str(w.message)]
    assert not overridden, overridden
    assert hasattr(opt.step, "_wrapped_by_lr_sched"), "close() took the scheduler's wrapper away"
PY
echo ok
