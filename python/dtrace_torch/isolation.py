"""DTRACE_ISOLATE: one module, or one ATen op, run alone from captured inputs,
DTRACE_REPEAT times, each repetition recorded as its own step (dtrace-fp(5)).

Generic by construction: a module is found by its qualified name in the model and
called with the arguments it was called with (tensors from the capture, other
values from torch-calls-r<rank>.ndjson), from the RNG state it started with, with
the model's parameters restored to the step's start (DTRACE_REPLAY_STEP). An op is
found by its overload name (torch.ops.<namespace>.<name>.<overload>) and called
with its captured tensor arguments and recorded non-tensor arguments; it needs no
model state at all. What cannot be re-run alone raises CaptureError saying why."""
from __future__ import annotations

import contextlib
from typing import Any, Dict, List, Optional

import torch

from dtrace import capi
from dtrace import isolation as captured

from . import calls, compiled, inductor, kernels, param_grads
from .dispatch import named_inputs
from .errors import CaptureError
from .fingerprints import _DTYPES
from .records import flatten

_TORCH_DTYPES = {v: k for k, v in _DTYPES.items()}


def resolve_op(name: str):
    """torch.ops.aten.mm.default from "aten.mm.default"; CaptureError when unknown."""
    parts = name.split(".")
    if len(parts) < 3:
        raise CaptureError(f"DTRACE_ISOLATE op {name!r}: not an ATen overload name (namespace.op.overload)")
    try:
        packet = getattr(getattr(torch.ops, parts[0]), ".".join(parts[1:-1]))
        return getattr(packet, parts[-1])
    except (AttributeError, RuntimeError) as e:
        raise CaptureError(f"DTRACE_ISOLATE op {name!r}: no such operator in this process "
                           f"(is the library that registers it imported?): {e}") from e


class Loader:
    """Tensors of the capture, by record identity, as fresh tensors."""

    def __init__(self, rec, scope: str, op: str):
        self.rec, self.scope, self.op = rec, scope, op

    def tensor(self, name: str, occurrence: int, device: Optional[str] = None,
               requires_grad: bool = False) -> torch.Tensor:
        native = self.rec.native
        index = captured.find(self.rec, self.scope, self.op, capi.IO_IN, name, occurrence)
        record = native.captured()[index]
        dtype = _TORCH_DTYPES.get(record["dtype"])
        if dtype is None:
            raise CaptureError(f"captured input '{name}' of {self.scope}: dtype {record['dtype']} unknown to torch")
        t = torch.empty(record["shape"], dtype=dtype)
        size = t.numel() * t.element_size()
        if size != record["bytes"]:
            raise CaptureError(f"captured input '{name}' of {self.scope}: {record['bytes']} bytes for shape "
                               f"{list(record['shape'])} of {record['dtype']}")
        native.captured_read(index, t.data_ptr() if size else 0, size)
        if device and device != "cpu":
            t = t.to(device)
        if requires_grad and t.is_floating_point():
            t.requires_grad_(True)
        return t


def _module(model: torch.nn.Module, name: str) -> torch.nn.Module:
    modules = dict(model.named_modules())
    if name not in modules:
        close = [m for m in modules if m and (name in m or m in name)][:5]
        raise CaptureError(f"DTRACE_ISOLATE: no module named {name!r} in this model"
                           + (f" (similar: {close})" if close else ""))
    return modules[name]


def _entries(rec, scope: str, op: Optional[str], step: int) -> List[Dict[str, Any]]:
    native = rec.native
    entries = calls.read(native.inputs_dir(), rec.rank, step, scope, op)
    wanted = native.isolate_occurrence()
    if wanted is not None:
        entries = [e for e in entries if e["occurrence"] == wanted]
    if not entries:
        raise CaptureError(f"{native.inputs_dir()}: no captured call of {scope}"
                           + (f" {op}" if op else "") + f" at step {step} for rank {rec.rank}")
    for e in entries:
        if "unrecordable" in e:
            raise CaptureError(f"{scope} {e['op']} cannot be re-run alone: its {e['unrecordable']} "
                               "could not be recorded")
    return entries


def isolate(rec, step: Optional[int]) -> None:
    rec.sink.active = True
    try:
        _isolate(rec, step)
    finally:
        rec.sink.active = rec.sink.pins = False


def _isolate(rec, step: Optional[int]) -> None:
    native = rec.native
    scope, op = native.isolate_scope(), native.isolate_op()
    records = native.captured()
    if not records:
        raise CaptureError(f"{native.inputs_dir()}: the capture holds no record for rank {rec.rank}")
    captured_step = records[0]["step"]
    repeat = native.repeat()
    # A region this process ran already (a session's step) must re-run from
    # its captured inputs without being compiled again (compiled.guards_held).
    region = _region_in(rec, scope) if rec._compiled is not None and rec._compiled.calls else None
    with compiled.guards_held(region) if region else contextlib.nullcontext():
        _isolate_target(rec, scope, op, captured_step, repeat, step)


def _region_in(rec, scope: str) -> Optional[str]:
    """The compiled region an isolation re-runs: that of a region's scope
    (fwd/blocks.0, bwd/blocks.0) or of a generated kernel's
    (fwd/blocks.0/inductor); None for any other (an eager op of a region's
    graph runs alone, without the compiled code)."""
    name = _region_name(compiled.kernel_scope(scope) or scope)
    return name if name in _regions(rec) else None


def _region_name(scope: str) -> str:
    """blocks.0 of fwd/blocks.0 or bwd/blocks.0: a region's name in its scope."""
    return scope.split("/", 1)[1] if "/" in scope else scope


def _isolate_target(rec, scope: str, op: Optional[str], captured_step: int, repeat: int,
                    step: Optional[int]) -> None:
    if op == compiled.REGION_OP:
        _isolate_region(rec, scope, captured_step, repeat, step)
    elif op and compiled.kernel_scope(scope) is not None:
        _isolate_kernel(rec, scope, op, captured_step, repeat, step)
    elif op:
        _isolate_op(rec, scope, op, captured_step, repeat)
    elif scope.startswith("fwd/"):
        _isolate_module(rec, scope, captured_step, repeat, step)
    elif scope.startswith("bwd/"):
        _isolate_backward(rec, scope, captured_step, repeat, step)
    else:
        raise CaptureError(f"DTRACE_ISOLATE={scope}: only module scopes fwd/<module>, bwd/<module> and "
                           "single ops (scope::op) can be re-run alone by dtrace_torch")


def _module_target(rec, scope: str, captured_step: int, step: Optional[int]):
    """The module a fwd/<name> or bwd/<name> scope names, with its captured
    calls and their loader; the scope's hooks record only that scope."""
    if step is None:
        raise CaptureError(f"DTRACE_ISOLATE={scope}: a module is re-run with the parameters of its step: "
                           "set DTRACE_REPLAY_STEP too")
    name = scope[len("fwd/"):]  # "bwd/" has the same length
    # A compiled region by its scope name (the whole model's is not a submodule).
    regions = _regions(rec)
    module = regions[name] if name in regions else _module(rec.model, name)
    op = type(module).__name__
    entries = _entries(rec, scope, op, captured_step)
    if rec._hooks:
        rec._hooks.only = scope  # no other scope is recorded; submodules' kernels land in this one
    return name, module, op, entries, Loader(rec, scope, op)


def _regions(rec) -> Dict[str, torch.nn.Module]:
    """The model's compiled regions by scope name (compiled.py)."""
    return rec._compiled.regions if rec._compiled is not None else {}


def begin_repetition(rec, k: int) -> None:
    """Repetition k begins: libdtrace's count, the occurrences from 0 again,
    and whether its calls may be pinned (DTRACE_PIN applies to each)."""
    rec.native.begin_repetition(k)
    rec.current_step = k
    if rec._hooks:
        rec._hooks.new_step()
    if rec._ops:
        rec._ops.new_step()
    rec._ask_pins()


def _mode(rec):
    """The dispatch mode a repetition runs under (Recorder._active_mode), or none."""
    mode = rec._active_mode()
    return mode if mode is not None else contextlib.nullcontext()


def _captured_call(e: Dict[str, Any], loader: Loader):
    """The positional and keyword arguments of one captured module call."""
    occ = e["occurrence"]

    def load(name: str, spec: Dict[str, Any]) -> torch.Tensor:
        # With the call's strides and storage offset: a compiled region's
        # guards hold as they did in the job, and it runs the code it ran.
        t = calls.restrided(loader.tensor(name, occ, spec.get("device")), spec)
        if spec.get("requires_grad", False) and t.is_floating_point():
            t.requires_grad_(True)
        return t

    return calls.decode(e["args"], load), calls.decode({"dict": e["kwargs"]}, load)


def _restore_rng(rec, scope: str, op: str, loader: Loader, occ: int) -> List:
    """Sets the RNG states the call started with; returns them as (name, tensor)."""
    states = []
    for rng_name, setter in (("rng.cpu", torch.set_rng_state), ("rng.cuda", _set_cuda_rng)):
        if rec.native.captured_find(scope, op, capi.IO_IN, rng_name, occ) is not None:
            states.append((rng_name, loader.tensor(rng_name, occ)))
            setter(states[-1][1])
    return states


def _isolate_module(rec, scope: str, captured_step: int, repeat: int, step: Optional[int]) -> None:
    name, module, op, entries, loader = _module_target(rec, scope, captured_step, step)
    for k in range(repeat):
        begin_repetition(rec, k)
        for e in entries:
            args, kwargs = _captured_call(e, loader)
            _restore_rng(rec, scope, op, loader, e["occurrence"])
            rec.sink.set_scope("step")
            try:
                with _mode(rec):
                    module(*args, **kwargs)
            except (RuntimeError, TypeError, ValueError) as err:
                raise CaptureError(f"the captured inputs of {scope} do not fit module {name} ({op}): {err}") from err
    rec.native.end_step()


def _isolate_backward(rec, scope: str, captured_step: int, repeat: int, step: Optional[int]) -> None:
    """A module's backward alone: its forward from the captured forward arguments
    and RNG states (recorded in bwd/<name> by the capture, hooks.py), unrecorded,
    then its backward from the captured output gradients, K times. Recorded in
    bwd/<name>: in = the arguments and output gradients, out = the input
    gradients (grad_input.<i>, as the full backward hook names them) and each
    use's contribution to the parameters' gradients, as the layer level records
    them (param_grads.py: param_grad.<name>, named from the isolated module, so
    a submodule's is param_grad.<sub>.<name>), as the nodes run; the backward's
    kernels at kernel level (a compiled region's generated kernels in
    bwd/<region>/inductor, compiled.py)."""
    name, module, op, entries, loader = _module_target(rec, scope, captured_step, step)
    params = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
    by_id = {id(p): n for n, p in params}
    for k in range(repeat):
        begin_repetition(rec, k)
        for e in entries:
            for _, p in params:
                p.grad = None
            args, kwargs, rng, outputs, grads = _backward_call(rec, scope, name, module, op, e, loader)
            tensor_args = [t for _, t in flatten("input", list(args))]
            inputs = flatten("input", list(args)) + flatten("input", kwargs)
            # The same rule as the layer level's (hooks.py), on the whole module.
            param_grads.watch(param_grads.find_uses(outputs, by_id, [t for _, t in inputs]),
                              lambda items: rec.sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_OUT, items))
            rec.sink.set_scope(scope)
            rec.sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_IN, inputs + rng + [(n, g) for n, _, g in grads])
            with _mode(rec):
                torch.autograd.backward([t for _, t, _ in grads], [g for _, _, g in grads])
            results = [(f"grad_input.{j}", t.grad) for j, t in enumerate(tensor_args) if t.grad is not None]
            rec.sink.tensors_(capi.LEVEL_LAYER, op, capi.IO_OUT, results)
            rec.sink.set_scope("step")
    rec.native.end_step()


def _backward_call(rec, scope: str, name: str, module: torch.nn.Module, op: str, e: Dict[str, Any],
                   loader: Loader):
    """What one captured backward call of a module (e, in bwd/<name>) runs
    from: its forward re-run, unrecorded, from the captured arguments and RNG
    states, with gradients; and the captured output gradients of its outputs.
    Returns (args, kwargs, rng, outputs, grads), grads [(name, output, gradient)]."""
    native = rec.native
    occ = e["occurrence"]
    args, kwargs = _captured_call(e, loader)
    rng = _restore_rng(rec, scope, op, loader, occ)
    rec.sink.set_scope("step")
    active, rec.sink.active = rec.sink.active, False  # the forward is not the scope's: nothing of it is recorded
    try:
        with torch.enable_grad():
            output = module(*args, **kwargs)
    except (RuntimeError, TypeError, ValueError) as err:
        raise CaptureError(f"the captured inputs of {scope} do not fit module {name} ({op}): {err}") from err
    finally:
        rec.sink.active = active
    outputs = [t for _, t in flatten("output", output)]
    grads = []
    for i, t in enumerate(outputs):
        if native.captured_find(scope, op, capi.IO_IN, f"grad_output.{i}", occ) is None:
            continue
        if not t.requires_grad:
            raise CaptureError(f"{scope}: output {i} of module {name} re-run from its captured inputs "
                               "needs no gradient, yet one was captured for it")
        g = loader.tensor(f"grad_output.{i}", occ, str(t.device))
        if tuple(g.shape) != tuple(t.shape):
            raise CaptureError(f"{scope}: captured grad_output.{i} has shape {list(g.shape)}, "
                               f"output {i} of module {name} has {list(t.shape)}")
        grads.append((f"grad_output.{i}", t, g))
    if not grads:
        raise CaptureError(f"{native.inputs_dir()}: no captured output gradient (grad_output.<i>) of "
                           f"{scope} {op}{captured.call_text(occ)} for rank {rec.rank}")
    return args, kwargs, rng, outputs, grads


def _set_cuda_rng(state: torch.Tensor) -> None:
    if torch.cuda.is_available():
        torch.cuda.set_rng_state(state)


def _isolate_op(rec, scope: str, op: str, captured_step: int, repeat: int) -> None:
    func = resolve_op(op)
    if any("Generator" in str(a.type) for a in func._schema.arguments):
        raise CaptureError(f"{scope} {op} draws random numbers from a generator whose state is not captured "
                           "per op: it cannot be re-run alone (isolate its module instead)")
    entries = _entries(rec, scope, op, captured_step)
    loader = Loader(rec, scope, op)
    # Under a capture (bisect's confirm replay) what the op runs beneath it is
    # listed from torch.profiler: the device kernels on CUDA (kernels.py).
    listing_dir = kernels.wanted(rec.native)
    listing = None
    for k in range(repeat):
        begin_repetition(rec, k)
        rec.sink.set_scope(scope)
        for e in entries:
            occ = e["occurrence"]
            load = lambda n, spec: calls.restrided(loader.tensor(n, occ, spec.get("device")), spec)
            args = calls.decode(e["args"], load)
            kwargs = calls.decode({"dict": e["kwargs"]}, load)
            if listing_dir and listing is None:
                listing = kernels.KernelList(op, kernels.device_of(t for _, t in named_inputs(func, args, kwargs)))
                # One more call, unrecorded, from fresh copies of its arguments:
                # the recorder's own work stays out of the profile.
                with listing.profile():
                    func(*calls.decode(e["args"], load), **calls.decode({"dict": e["kwargs"]}, load))
            if rec._mode is not None:
                with rec._mode:
                    func(*args, **kwargs)
            else:  # recorded at a level below kernel: still record the op
                rec.sink.tensors_(capi.LEVEL_STEP, op, capi.IO_IN, named_inputs(func, args, kwargs))
                out = func(*args, **kwargs)
                outputs = flatten("out", out if isinstance(out, (tuple, list)) else [out])
                if rec.sink.pins:
                    rec.sink.take_pins(op, outputs)
                rec.sink.tensors_(capi.LEVEL_STEP, op, capi.IO_OUT, outputs)
    if listing is not None:
        listing.write(listing_dir, rec.rank, scope)
    rec.native.end_step()


def _tensor_specs(entry: Dict[str, Any]) -> List[Dict[str, Any]]:
    """The tensor arguments' specs (calls.encode) of one captured call."""
    found: List[Dict[str, Any]] = []

    def walk(value: Any) -> None:
        if isinstance(value, list):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            if "tensor" in value:
                found.append(value)
            else:
                for v in value.values():
                    walk(v)

    walk([entry.get("args", []), entry.get("kwargs", {})])
    return found


def _profiled(call: "inductor.KernelCall"):
    """A generated kernel's call as the profiler's event of its name, as
    inductor's cpp.enable_kernel_profile would name it, without compiling
    the region again for that (its configuration is part of the cache key)."""
    with torch.profiler.record_function(call.name):
        return call.run()


def _isolate_region(rec, scope: str, captured_step: int, repeat: int, step: Optional[int]) -> None:
    """DTRACE_ISOLATE=fwd/<region>::torch.compile: the compiled module called K
    times from its captured arguments and RNG states, with the parameters of
    step N, each repetition recorded as the one op (compiled.Regions records
    it, whatever the level); under a capture what ran inside it is listed
    (kernels.py)."""
    op = compiled.REGION_OP
    name, module = _region_target(rec, scope, op, step)
    entries = _entries(rec, scope, op, captured_step)
    loader = Loader(rec, scope, op)
    listing_dir = kernels.wanted(rec.native)
    on_cpu = not any(str(spec.get("device", "")).startswith("cuda") for spec in _tensor_specs(entries[0]))
    if listing_dir and on_cpu and not inductor.available():
        # On the CPU inductor's kernels report to the profiler by themselves
        # only when compiled to (one compile more, which inductor's cache
        # then keeps for the other side's confirm): where they cannot be
        # watched (inductor.py), that compile; else the listing call names
        # them itself (below) and the region runs as cached. On CUDA the
        # profiler sees the device kernels as they are.
        kernels.profile_generated_kernels()
    if rec._hooks:
        rec._hooks.only = f"{scope}::{op}"  # no module scope records: only the op's
    rec._compiled.isolating = True
    for k in range(repeat):
        rec.native.begin_repetition(k)
        rec.current_step = k
        if rec._ops:
            rec._ops.new_step()
        rec._ask_pins()
        for e in entries:
            args, kwargs = _captured_call(e, loader)
            _restore_rng(rec, scope, op, loader, e["occurrence"])
            rec.sink.set_scope(scope)
            try:  # with gradients as in the job: the graph dynamo compiled for it
                module(*args, **kwargs)
            except (RuntimeError, TypeError, ValueError) as err:
                raise CaptureError(f"the captured inputs of {scope} do not fit compiled region {name}: {err}") from err
    if listing_dir:
        # One more call, unrecorded, once compiled: the profile holds what the
        # compiled code ran, not dynamo's and inductor's compiling.
        e = entries[0]
        args, kwargs = _captured_call(e, loader)
        listing = kernels.KernelList(op, kernels.device_of(t for _, t in flatten("a", [args, kwargs])))
        _restore_rng(rec, scope, op, loader, e["occurrence"])
        # The compiled forward itself (no hook, nothing recorded); on the CPU
        # each generated kernel named to the profiler as it runs.
        with listing.profile(), inductor.watch(_profiled, fill=False) if on_cpu else contextlib.nullcontext():
            rec._compiled.compiled_call(name)(*args, **kwargs)
        listing.write(listing_dir, rec.rank, scope)
    rec.native.end_step()


def _region_target(rec, scope: str, op: str, step: Optional[int], backward: bool = False):
    """The region name and compiled module of fwd/<region> (scope), or of
    bwd/<region> when `backward` (a generated kernel of its backward), or
    CaptureError saying why it cannot be re-run alone (`op` for the message)."""
    name = _region_name(scope)
    regions = _regions(rec)
    if not scope.startswith("fwd/") and not (backward and scope.startswith("bwd/")):
        raise CaptureError(f"{scope} {op}: the backward of compiled region {name} cannot be re-run "
                           "alone (its saved tensors are the compiled forward's): the divergence lies inside "
                           f"that region's backward (its generated kernels, recorded one by one in "
                           f"{scope}/{compiled.INDUCTOR} at kernel level, can be re-run alone)")
    if name not in regions:
        raise CaptureError(f"DTRACE_ISOLATE={scope}::{op}: no compiled region named {name!r} in this "
                           f"model (it has: {sorted(regions) or 'none'})")
    if step is None:
        raise CaptureError(f"DTRACE_ISOLATE={scope}::{op}: a compiled region is re-run with the "
                           "parameters of its step: set DTRACE_REPLAY_STEP too")
    return name, regions[name]


def _this_process_kernel(rec, region_scope: str, name: str, captured_step: int, e: Dict[str, Any], op: str):
    """The generated kernel a captured kernel call (e) names, as this
    process's compile of the region has it: the region's captured call it
    ran in is run once, unrecorded, and the kernel called at the same place
    of it is the one. Not the capture's output code file: each side runs the
    code its own job compiled (another inductor configuration, another
    machine), as the region's own confirm does."""
    region_op = compiled.REGION_OP
    occ = e.get("region_occurrence", 0)
    calls_of = [c for c in calls.read(rec.native.inputs_dir(), rec.rank, captured_step, region_scope, region_op)
                if c["occurrence"] == occ]
    if not calls_of or "index" not in e:
        raise CaptureError(f"{rec.native.inputs_dir()}: no captured call {occ} of {region_scope} {region_op} "
                           f"at step {captured_step} for rank {rec.rank}, which generated kernel {op} ran in")
    loader = Loader(rec, region_scope, region_op)
    args, kwargs = _captured_call(calls_of[0], loader)
    _restore_rng(rec, region_scope, region_op, loader, occ)
    seen: List = []

    def discover(call):
        seen.append(call)
        return call.run()

    active, rec.sink.active = rec.sink.active, False
    try:
        with inductor.watch(discover, fill=False):
            rec._compiled.compiled_call(name)(*args, **kwargs)
    except (RuntimeError, TypeError, ValueError) as err:
        raise CaptureError(f"the captured inputs of {region_scope} do not fit compiled region {name}: {err}") from err
    finally:
        rec.sink.active = active
    index = e["index"]
    if index >= len(seen) or seen[index].name != op:
        ran = ", ".join(c.name for c in seen) or "none"
        raise CaptureError(f"compiled region {name}, re-run from its captured inputs, does not call {op} as "
                           f"kernel {index} of its call (it called: {ran}): this process compiled it to other code")
    return seen[index]


def _this_process_backward_kernels(rec, region_scope: str, name: str, captured_step: int,
                                   entries: List[Dict[str, Any]], op: str) -> List:
    """The generated kernels of a region's backward that captured kernel
    calls (entries, in bwd/<region>/inductor) name, as this process's compile
    of the region has them: the region's captured backward calls (its forward
    arguments, RNG states and output gradients in bwd/<region>, what the
    layer's isolation runs from) are run once, unrecorded, as
    _isolate_backward runs them, and the kernel called at the same place
    (the same compiled backward node, counted as a recording counts it, and
    the same place among that node's kernels: compiled.Regions.discover) is
    each one. Not the capture's output code, as for the forward's kernels."""
    module = _regions(rec)[name]
    mop = type(module).__name__
    layer_calls = sorted(calls.read(rec.native.inputs_dir(), rec.rank, captured_step, region_scope, mop),
                         key=lambda c: c["occurrence"])
    if not layer_calls:
        raise CaptureError(f"{rec.native.inputs_dir()}: no captured call of {region_scope} {mop} at step "
                           f"{captured_step} for rank {rec.rank}, whose backward generated kernel {op} ran in "
                           f"(a capture of {region_scope} holds it)")
    loader = Loader(rec, region_scope, mop)
    if rec._hooks:
        rec._hooks.only = region_scope  # as the layer's isolation: its node's kernels placed in its scope
    active, rec.sink.active = rec.sink.active, False
    try:
        with rec._compiled.discover() as found:
            for c in layer_calls:
                _, _, _, _, grads = _backward_call(rec, region_scope, name, module, mop, c, loader)
                rec.sink.set_scope(region_scope)
                # Without the dispatch mode: nothing of it is recorded or logged.
                torch.autograd.backward([t for _, t, _ in grads], [g for _, _, g in grads])
    finally:
        rec.sink.active = active
        rec.sink.set_scope("step")
    scope = f"{region_scope}/{compiled.INDUCTOR}"
    kernels_of = []
    for e in entries:
        node, index = e.get("region_occurrence", 0), e.get("index", 0)
        ran = [call for s, o, call in found if s == scope and o == node]
        if index >= len(ran) or ran[index].name != op:
            raise CaptureError(f"the backward of compiled region {name}, re-run from its captured inputs, does not "
                               f"call {op} as kernel {index} of its compiled backward node {node} (it called: "
                               f"{', '.join(c.name for c in ran) or 'none'}): this process compiled it to other "
                               "code")
        kernels_of.append(ran[index])
    return kernels_of


def _isolate_kernel(rec, scope: str, op: str, captured_step: int, repeat: int, step: Optional[int]) -> None:
    """DTRACE_ISOLATE=fwd/<region>/inductor::<kernel> (or bwd/<region>/...):
    one of inductor's generated kernels, as this process compiled the region
    (_this_process_kernel, _this_process_backward_kernels), called K times
    from its captured arguments (tensors it reads from the capture, laid out
    as in the job; buffers it only writes allocated as the generated code
    allocates them, zero-filled), each repetition recording it as the
    region's kernel level does (compiled.Regions.record_kernel)."""
    region_scope = compiled.kernel_scope(scope)
    name, _ = _region_target(rec, region_scope, op, step, backward=True)
    if not inductor.available():
        raise CaptureError(f"{scope} {op}: this torch's generated kernels cannot be called one by one "
                           "(dtrace_torch's inductor.py)")
    entries = _entries(rec, scope, op, captured_step)
    loader = Loader(rec, scope, op)
    if region_scope.startswith("bwd/"):
        kernels_of = _this_process_backward_kernels(rec, region_scope, name, captured_step, entries, op)
    else:
        kernels_of = [_this_process_kernel(rec, region_scope, name, captured_step, e, op) for e in entries]
    listing_dir = kernels.wanted(rec.native)
    if rec._hooks:
        rec._hooks.only = f"{scope}::{op}"  # no module scope records: only the op's
    for k in range(repeat):
        begin_repetition(rec, k)
        for e, kernel in zip(entries, kernels_of):
            occ = e["occurrence"]
            allocate = e.get("allocate", {})

            def load(n: str, spec: Dict[str, Any]) -> torch.Tensor:
                if n in allocate:
                    a = allocate[n]
                    t = torch.zeros(a["shape"], dtype=getattr(torch, a["dtype"]), device=a.get("device", "cpu"))
                    return calls.restrided(t, a)
                return calls.restrided(loader.tensor(n, occ, spec.get("device")), spec)

            args = calls.decode(e["args"], load)
            call = inductor.KernelCall(op, kernel.fn, tuple(args), kernel.params, kernel.source, kernel.index)
            rec._compiled.record_kernel(call, scope, e.get("region_occurrence", 0))
    if listing_dir:
        # The kernel itself, and the output code it is in (this process's).
        listing = kernels.KernelList(op, kernels.device_of(kernels_of[0].args))
        listing.names = [op]
        listing.write(listing_dir, rec.rank, scope, source=f"inductor output code {kernels_of[0].source}")
    rec.native.end_step()
