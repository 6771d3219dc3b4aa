"""torch.compile'd regions (torch 2.x): what the job computed, not an eager stand-in.

A region is a module torch.compile(module) returned (an OptimizedModule), found
anywhere in the model; the whole model itself when the Recorder was handed the
compiled model (its scope is then named `_orig_mod`, the name torch gives the
module it compiled). dtrace_torch records a region as one opaque unit
(docs/torch.md, torch.compile):

- layer level: the region is a scope, fwd/<region> and bwd/<region>, by the
  ordinary module hooks on the compiled module (they run outside the compiled
  code); torch never calls its full backward hook, so the region's input
  gradients are recorded from a hook on those inputs instead (_input_gradients). The modules inside it get no hooks: a hook there would run inside
  dynamo's trace, break the graph at every boundary and so change the kernels
  inductor generates, and what it recorded would not be what the job ran.
- kernel level: the dispatch mode (dispatch.OpRecorder) would make dynamo run
  the region eagerly (convert_frame.py: "non-infra torch dispatch mode present,
  this is not supported today in torch.compile"), or, once compiled, see only
  the generated code's extern calls. So the mode is set aside while a region
  runs, and the region's call is recorded as one op, REGION_OP, in its scope:
  `in` its arguments and RNG states, `out` its results. Its backward: each
  compiled backward node of the region (AOTAutograd's CompiledFunctionBackward)
  runs with the mode set aside too and is recorded as one REGION_OP call in
  bwd/<region>: `in` its output gradients, `out` the gradients it produced,
  the region's parameters' included.
- isolation of fwd/<region>::REGION_OP (bisect's confirm) calls the compiled
  module with the captured arguments (isolate_region); what ran inside it is
  listed from torch.profiler (kernels.py), inductor's kernels and the ops its
  generated code called. A backward node cannot be re-run alone (its saved
  tensors are the compiled forward's): refused, saying the divergence lies in
  that region's backward.
- pinned ops (dtrace-fp(5)): where pins may apply (sink.pins, in replays), a
  region's call and each of its compiled backward nodes ask, as one REGION_OP
  call, for each of their results whether it is pinned, right after they ran
  and before anything reads them, at every level (the dispatch mode the step
  runs under, Recorder._active_mode, is set aside as at kernel level); a
  pinned result takes the pinned bytes in place.

A module compiled in place (Module.compile(), whose hooks run inside the
compiled code) is refused at layer and kernel level."""
from __future__ import annotations

import contextlib
from typing import Dict, List, Optional

import torch

from dtrace import capi

from . import kernels
from .errors import CaptureError, DtraceError
from .records import flatten

REGION_OP = "torch.compile"
WHOLE_MODEL = "_orig_mod"  # the scope name of a region that is the whole model


def _optimized_module():
    try:
        from torch._dynamo.eval_frame import OptimizedModule
    except ImportError:  # torch 1.13: no torch.compile, no regions
        return None
    return OptimizedModule


def find(model: torch.nn.Module) -> Dict[str, torch.nn.Module]:
    """{region name: compiled module}: the outermost OptimizedModules by their
    qualified names (WHOLE_MODEL for the model itself). Raises DtraceError for a
    module compiled in place."""
    optimized = _optimized_module()
    if optimized is None:
        return {}
    found: Dict[str, torch.nn.Module] = {}
    for name, module in model.named_modules():
        if any(name == r or name.startswith(r + ".") for r in found) or (WHOLE_MODEL in found):
            continue
        if isinstance(module, optimized):
            found[name or WHOLE_MODEL] = module
        elif getattr(module, "_compiled_call_impl", None) is not None:
            raise DtraceError(f"module {name or '(the model)'} ({type(module).__name__}) was compiled in place "
                              "(Module.compile()): its hooks would run inside the compiled code. Record the "
                              "module torch.compile(module) returns instead (docs/torch.md, torch.compile)")
    return found


def hooked_modules(model: torch.nn.Module, regions: Dict[str, torch.nn.Module]):
    """(scope name, module) of every module that gets the layer level's hooks:
    every named submodule outside the regions, and each region itself."""
    inside = [r for r in regions if r != WHOLE_MODEL]
    if WHOLE_MODEL in regions:
        yield WHOLE_MODEL, regions[WHOLE_MODEL]
        return
    for name, module in model.named_modules():
        if name and not any(name.startswith(r + ".") for r in inside):
            yield name, module


@contextlib.contextmanager
def mode_set_aside(mode):
    """Without `mode` while the body runs, when it is the innermost mode. Left
    and entered again through its own __exit__ and __enter__: dynamo reads the
    flags they keep (utils/_python_dispatch.py), not only the mode stack."""
    from torch.utils._python_dispatch import _get_current_dispatch_mode
    if mode is None or _get_current_dispatch_mode() is not mode:
        yield
        return
    mode.__exit__(None, None, None)
    try:
        yield
    finally:
        mode.__enter__()


def _compiled_nodes(outputs: List[torch.Tensor], stops) -> List:
    """The compiled backward nodes between a region's outputs and its inputs."""
    # Nodes are compared by identity, and each visited node is kept referenced
    # meanwhile: next_functions hands out wrapper objects whose ids a freed
    # wrapper's may reuse, which would cut the walk short.
    kept = [t.grad_fn for t in stops if isinstance(t, torch.Tensor) and t.grad_fn is not None]
    stop = {id(n) for n in kept}
    seen, found, todo = set(), [], [t.grad_fn for t in outputs if t.grad_fn is not None]
    while todo:
        node = todo.pop()
        if node is None or id(node) in seen or id(node) in stop:
            continue
        kept.append(node)
        seen.add(id(node))
        if type(node).__name__.startswith("CompiledFunction"):
            found.append(node)
        todo.extend(n for n, _ in node.next_functions)
    return found


class Regions:
    """Sets the dispatch mode aside around each region's forward and compiled
    backward and records them as REGION_OP at kernel level."""

    def __init__(self, recorder, regions: Dict[str, torch.nn.Module]):
        self.rec = recorder
        self.regions = regions
        self.originals = {}
        self.isolating = False  # isolate_region: recorded whatever the level
        for name, module in regions.items():
            self._wrap(name, module)
        if recorder.native.isolate_op() == REGION_OP and kernels.wanted(recorder.native):
            # The region's listing (isolate_region) names inductor's generated
            # kernels only when they report to the profiler; set before the
            # region is first compiled in this process. It adds the profiler's
            # calls around each kernel and changes none of its arithmetic.
            import torch._inductor.config
            if not torch._inductor.config.cpp.enable_kernel_profile:
                torch._inductor.config.cpp.enable_kernel_profile = True
                if getattr(recorder, "_session", None) is not None:
                    # A replay session's earlier requests compiled the region
                    # without it (as the job ran it): compiled again from here
                    # on, as the confirm replay a launch would start compiles it.
                    import torch._dynamo
                    torch._dynamo.reset()

    def _level(self) -> int:
        # An isolated region below kernel level is still recorded, as
        # isolation.py records a lone op.
        return capi.LEVEL_KERNEL if self.rec._mode is not None else capi.LEVEL_STEP

    def _record(self, io: int, items) -> None:
        self.rec.sink.tensors_(self._level(), REGION_OP, io, items)

    def _occurrence(self) -> int:
        counts = self.rec._mode.calls if self.rec._mode is not None else {}
        key = (self.rec.sink.scope or "", REGION_OP)
        occurrence = counts.get(key, 0)
        counts[key] = occurrence + 1
        return occurrence

    def _wrap(self, name: str, module: torch.nn.Module) -> None:
        inner = module.forward
        self.originals[name] = inner
        bwd = f"bwd/{name}"
        rec = self

        def forward(*args, **kwargs):
            mode = rec.rec._active_mode()
            if mode is None and rec.rec._hooks is None and not rec.isolating:
                return inner(*args, **kwargs)
            # The op is recorded at kernel level, and in an isolation of it
            # whatever the level; at layer level the hooks record the region.
            sink = rec.rec.sink
            wanted = (rec.rec._mode is not None or rec.isolating) and sink.active and \
                sink.native.wants(rec._level())
            if wanted:
                from .hooks import rng_inputs
                occurrence = rec._occurrence()
                rec._record(capi.IO_IN, flatten("input", list(args)) + flatten("input", kwargs) + rng_inputs(module))
                rec.rec.log_call(rec.rec.sink.scope or "", REGION_OP, occurrence, args, kwargs)
            with mode_set_aside(mode):
                out = inner(*args, **kwargs)
            pinning = sink.pins and sink.active
            if wanted or pinning:
                outputs = flatten("out", out if isinstance(out, (tuple, list)) else [out])
                if pinning:
                    sink.take_pins(REGION_OP, outputs)  # in place, before the hooks or the caller read them
                if wanted:
                    rec._record(capi.IO_OUT, outputs)
            if rec.rec._hooks is not None and torch.is_grad_enabled():
                stops = [t for _, t in flatten("input", list(args)) + flatten("input", kwargs)]
                if mode is not None:
                    results = [t for _, t in flatten("out", out) if t.requires_grad]
                    # No input needs a gradient (a whole model fed token ids):
                    # nothing marks the end of the region's backward but its
                    # last compiled node, after which its scope is left (at
                    # kernel level; a pinned layer-level step keeps the
                    # layer level's scopes).
                    last = rec.rec._mode is not None and rec.rec.backward_hooks and \
                        not any(t.requires_grad for t in stops)
                    rec._watch_backward(_compiled_nodes(results, stops), bwd, last)
                if rec.rec.backward_hooks:
                    rec._input_gradients(stops, bwd, type(module).__name__)
            return out

        module.forward = forward

    def _watch_backward(self, nodes: List, bwd: str, leave: bool) -> None:
        """The compiled backward nodes of one region call: each runs in
        bwd/<region> without the dispatch mode and is recorded at kernel level
        as one REGION_OP call. `leave`: the last of them leaves the scope."""
        rec = self.rec
        left = [len(nodes)]

        def watch(node) -> None:
            state = {}

            def pre(grad_outputs):
                hooks = rec._hooks
                scope = bwd if hooks is None or hooks.only is None else rec.sink.scope
                state["previous"] = rec.sink.set_scope(scope)
                if rec.sink.active and rec.sink.native.wants(capi.LEVEL_KERNEL):
                    self._occurrence()
                    rec.sink.tensors_(capi.LEVEL_KERNEL, REGION_OP, capi.IO_IN,
                                      flatten("grad_output", list(grad_outputs)))
                state["mode"] = contextlib.ExitStack()
                state["mode"].enter_context(mode_set_aside(rec._active_mode()))
                return None

            def post(grad_inputs, grad_outputs):
                if "mode" in state:
                    state.pop("mode").close()
                grads = flatten("grad_input", list(grad_inputs))
                if rec.sink.pins and rec.sink.active:
                    rec.sink.take_pins(REGION_OP, grads)  # in place: the engine passes these on
                rec.sink.tensors_(capi.LEVEL_KERNEL, REGION_OP, capi.IO_OUT, grads)
                rec.sink.set_scope(state.pop("previous", None) or rec.sink.scope)
                left[0] -= 1
                hooks = rec._hooks
                if leave and left[0] == 0 and hooks is not None and hooks.only is None and bwd in hooks.bwd_stack:
                    hooks._leave_bwd(bwd)
                return None

            node.register_prehook(pre)
            node.register_hook(post)

        for node in nodes:
            watch(node)

    def _input_gradients(self, inputs: List[torch.Tensor], bwd: str, op: str) -> None:
        """The module's full backward hook, which torch never calls for a
        compiled module (its backward pre-hook it does): once the gradients of
        all the region's inputs are computed, hooks.py records them
        (grad_input.<i> in bwd/<region>) and leaves the scope."""
        rec = self.rec
        wanted = [t for t in inputs if t.requires_grad]
        if not wanted:
            return

        def done(grads):
            hooks = rec._hooks
            if hooks is None or hooks.only is not None:  # isolation records its own (isolation.py)
                return
            # One per tensor argument, None where it needs none, as the full hook's.
            computed = iter(grads)
            hooks.backward_done(bwd, op, tuple(next(computed) if t.requires_grad else None for t in inputs), None)

        torch.autograd.graph.register_multi_grad_hook(wanted, done)

    def remove(self) -> None:
        for name, inner in self.originals.items():
            self.regions[name].forward = inner
        self.originals.clear()


def isolate_region(rec, scope: str, captured_step: int, repeat: int, step: Optional[int]) -> None:
    """DTRACE_ISOLATE=fwd/<region>::torch.compile: the compiled module called K
    times from its captured arguments and RNG states, with the parameters of
    step N, each repetition recorded as the one op; under a capture what ran
    inside it is listed (kernels.py)."""
    from .isolation import Loader, _captured_call, _entries, _restore_rng
    name = scope.split("/", 1)[1] if "/" in scope else scope
    regions = rec._compiled.regions if rec._compiled is not None else {}
    if not scope.startswith("fwd/"):
        raise CaptureError(f"{scope} {REGION_OP}: the backward of compiled region {name} cannot be re-run "
                           "alone (its saved tensors are the compiled forward's): the divergence lies inside "
                           f"that region's backward")
    if name not in regions:
        raise CaptureError(f"DTRACE_ISOLATE={scope}::{REGION_OP}: no compiled region named {name!r} in this "
                           f"model (it has: {sorted(regions) or 'none'})")
    if step is None:
        raise CaptureError(f"DTRACE_ISOLATE={scope}::{REGION_OP}: a compiled region is re-run with the "
                           "parameters of its step: set DTRACE_REPLAY_STEP too")
    module = regions[name]
    entries = _entries(rec, scope, REGION_OP, captured_step)
    loader = Loader(rec, scope, REGION_OP)
    if rec._hooks:
        rec._hooks.only = f"{scope}::{REGION_OP}"  # no module scope records: only the op's
    rec._compiled.isolating = True
    listing_dir = kernels.wanted(rec.native)
    for k in range(repeat):
        rec.native.begin_repetition(k)
        rec.current_step = k
        if rec._ops:
            rec._ops.new_step()
        rec._ask_pins()
        for e in entries:
            args, kwargs = _captured_call(e, loader)
            _restore_rng(rec, scope, REGION_OP, loader, e["occurrence"])
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
        listing = kernels.KernelList(REGION_OP, kernels.device_of(t for _, t in flatten("a", [args, kwargs])))
        _restore_rng(rec, scope, REGION_OP, loader, e["occurrence"])
        with listing.profile():  # the compiled forward itself: no hook, nothing recorded
            rec._compiled.originals[name](*args, **kwargs)
        listing.write(listing_dir, rec.rank, scope)
    rec.native.end_step()
