"""torch.compile'd regions (torch 2.x): what the job computed, not an eager stand-in.

A region is a module torch.compile(module) returned (an OptimizedModule), found
anywhere in the model; the whole model itself when the Recorder was handed the
compiled model (its scope is then named after the class of the module the user
compiled, whole_model_name, never `_orig_mod`). dtrace_torch records a region
as one unit (docs/torch.md, torch.compile), and this module is all that knows
one: hooks.py asks it which modules get hooks (hooked_modules), isolation.py
which regions there are (Regions.regions) and how to call one unrecorded
(Regions.compiled_call); it imports neither of them.

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
- the region's graph, op by op: at kernel level, before its compiled call,
  the module dynamo compiled (`_orig_mod`) runs eagerly under the dispatch
  mode in the sub-scope <scope>/eager (_eager_graph), its results dropped, the
  RNG states and buffers put back: every ATen or custom op of it is recorded,
  captured and isolated as an eager model's, so bisect's kernel pass names
  the op there (fwd/blocks.0/eager dtrace_example.combine.default) when the
  eager graph reproduces the difference.
- the generated kernels, one by one: at kernel level, while the region's
  compiled call runs, each of inductor's generated kernels it calls
  (inductor.py watches them) is one op in the sub-scope <scope>/inductor,
  named as the output code names it (cpp_fused_sum_0): `in` the tensors it
  reads before it ran, `out` those it wrote after (record_kernel). So the
  records of one call are its arguments, the eager graph's ops, the
  generated kernels, its results, and the kernel pass names the first
  generated kernel that differs from agreeing inputs when the eager graph
  agrees (fwd/blocks.0/inductor cpp_fused_..._0), and REGION_OP when none
  does (an op the generated code calls, kernels that cannot be watched).
  The compiled backward likewise: while each compiled backward node runs,
  the kernels of the backward graph's output code it calls are ops in
  bwd/<region>/inductor, between the node's REGION_OP in and out, each
  logged under a capture with the node's REGION_OP occurrence (counted
  whether recorded or not) and its place among the node's kernels.
- isolation of fwd/<region>::REGION_OP (bisect's confirm) calls the compiled
  module with the captured arguments (isolation.py); what ran inside it is
  listed from torch.profiler (kernels.py), inductor's kernels (named to the
  profiler as they run, inductor.py: nothing compiled again) and the ops its
  generated code called. Isolation of fwd/<region>/inductor::<kernel> calls
  that one kernel, as this process compiled the region, from its captured
  arguments. A backward node cannot be re-run alone (its saved
  tensors are the compiled forward's): refused, saying the divergence lies in
  that region's backward. Isolation of bwd/<region>/inductor::<kernel> calls
  that one kernel of the compiled backward, as this process compiled it: the
  region's captured backward call is run once, unrecorded, under discover(),
  which lists every generated kernel with its place, to find it. An
  isolation that re-runs a region already run in this process (a replay
  session) runs under guards_held: a recompile (a guard that fails) is
  refused, never taken for the code the job ran.
- pinned ops (dtrace-fp(5)): where pins may apply (sink.pins, in replays), a
  region's call and each of its compiled backward nodes ask, as one REGION_OP
  call, for each of their results whether it is pinned, right after they ran
  and before anything reads them, at every level (the dispatch mode the step
  runs under, Recorder._active_mode, is set aside as at kernel level); a
  pinned result takes the pinned bytes in place. The eager graph runs there
  too, its ops asking for theirs: when one of them took a pin, the region's
  results are the eager graph's (the compiled code's own call of that op
  cannot be pinned from outside), so the difference a named op of a region
  caused disappears from the later replays as an eager op's does. A
  generated kernel asks too, as it ran, for each tensor it wrote: a pinned
  one takes the pinned bytes in place, before the next kernel reads it; so
  does a kernel of a compiled backward node.

A module compiled in place (Module.compile(), whose hooks run inside the
compiled code) is refused at layer and kernel level."""
from __future__ import annotations

import contextlib
import json
import os
from typing import Dict, List, Optional

import torch

from dtrace import capi
from dtrace import checkpoints as files

from . import inductor
from .errors import CaptureError, DtraceError
from .records import flatten, rng_inputs

REGION_OP = "torch.compile"
# The sub-scope of a region's scope in which its graph, run eagerly, is
# recorded at kernel level: fwd/<region>/eager.
EAGER = "eager"
# The sub-scope in which inductor's generated kernels, as the region's
# compiled call runs them, are recorded at kernel level: fwd/<region>/inductor.
INDUCTOR = "inductor"


def kernel_scope(scope: str) -> Optional[str]:
    """The region's scope (fwd/blocks.0) of a generated kernel's scope
    (fwd/blocks.0/inductor); None for any other scope."""
    suffix = "/" + INDUCTOR
    return scope[:-len(suffix)] if scope.endswith(suffix) and len(scope) > len(suffix) else None


@contextlib.contextmanager
def guards_held(region: str):
    """While region `region` is re-run from captured inputs (an isolation):
    dynamo may run the code it compiled, never compile it again. A recompile
    (a guard that fails: other strides, another grad mode, a changed global)
    would run other generated code than the job ran, and repetitions of it
    are no evidence of what the job did: refused, with dynamo's reasons, as a
    CaptureError. Used where the region already ran in this process (a replay
    session's step, Regions.calls): the isolation then re-runs a call dynamo
    compiled for, from its captured inputs, and every frame of it must find
    its code. A launched isolation compiles from the captured inputs, whose
    strides and storage offsets are the job's, and what it compiles again
    within that call (an inner frame whose shapes vary: automatic dynamic
    shapes) the job compiled too: not checked."""
    try:
        import torch._dynamo
        from torch._dynamo.exc import RecompileError
    except ImportError:  # torch 1.13: nothing is compiled
        yield
        return
    try:
        with torch._dynamo.config.patch(error_on_recompile=True):
            yield
    except Exception as err:
        # Isolation wraps a failing call's error in its own (the inputs do
        # not fit): the recompile is then its cause.
        cause = err if isinstance(err, RecompileError) else err.__cause__
        if not isinstance(cause, RecompileError):
            raise
        reasons = [line.strip()[2:] for line in str(cause).splitlines() if line.strip().startswith("- ")]
        raise CaptureError(f"compiled region {region}, re-run from its captured inputs, would be compiled again "
                           f"({'; '.join(reasons) or str(cause).splitlines()[0]}): its repetitions would run "
                           "other code than the job ran, so they are not evidence") from cause


def _optimized_module():
    try:
        from torch._dynamo.eval_frame import OptimizedModule
    except ImportError:  # torch 1.13: no torch.compile, no regions
        return None
    return OptimizedModule


def whole_model_name(model: torch.nn.Module) -> str:
    """The scope name of a region that is the whole model: the class name of
    the module the user compiled (GPT), not `_orig_mod`, the attribute torch
    keeps it in."""
    return type(getattr(model, "_orig_mod", model)).__name__


# What each part of a region (a sub-scope of its scope) is, as regions.rank<r>.json
# tells bisect, which reports it with an op named there.
PARTS = {EAGER: "the region's graph run op by op, without the compiler (dynamo's graph, eager)",
         INDUCTOR: "the kernels inductor generated for the region, one by one"}


def declare(capture_dir: str, rank: int, regions: Dict[str, torch.nn.Module]) -> str:
    """Writes <capture>/regions.rank<r>.json (dtrace-fp(5), Compiled regions):
    the regions' scopes, forward and backward, so bisect reports the region an
    op it names lies in, apart from the op. Returns the path."""
    declared = [{"scope": f"{direction}/{name}", "kind": REGION_OP, "parts": PARTS}
                for name in regions for direction in ("fwd", "bwd")]
    text = json.dumps({"regions": declared}).encode()
    return files.write_atomically(os.path.join(capture_dir, f"regions.rank{rank}.json"), lambda f: f.write(text))


def find(model: torch.nn.Module) -> Dict[str, torch.nn.Module]:
    """{region name: compiled module}: the outermost OptimizedModules by their
    qualified names (whole_model_name for the model itself). Raises DtraceError
    for a module compiled in place."""
    optimized = _optimized_module()
    if optimized is None:
        return {}
    if isinstance(model, optimized):
        return {whole_model_name(model): model}
    found: Dict[str, torch.nn.Module] = {}
    for name, module in model.named_modules():
        if any(name == r or name.startswith(r + ".") for r in found):
            continue
        if isinstance(module, optimized):
            found[name] = module
        elif getattr(module, "_compiled_call_impl", None) is not None:
            raise DtraceError(f"module {name or '(the model)'} ({type(module).__name__}) was compiled in place "
                              "(Module.compile()): its hooks would run inside the compiled code. Record the "
                              "module torch.compile(module) returns instead (docs/torch.md, torch.compile)")
    return found


def hooked_modules(model: torch.nn.Module, regions: Dict[str, torch.nn.Module]):
    """(scope name, module) of every module that gets the layer level's hooks:
    every named submodule outside the regions, and each region itself."""
    for name, module in regions.items():
        if module is model:  # the whole model: one region, nothing else
            yield name, module
            return
    for name, module in model.named_modules():
        if name and not any(name.startswith(r + ".") for r in regions):
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
        self.isolating = False  # isolation.py's region isolation: recorded whatever the level
        # Compiled calls of any region in this process: once one ran (a
        # replay's step), dynamo holds what it compiled for the job's call.
        self.calls = 0
        # While discover() runs: (scope, region call occurrence, KernelCall)
        # of each generated kernel called, in order; nothing is recorded.
        self.discovered: Optional[List] = None
        for name, module in regions.items():
            self._wrap(name, module)

    def compiled_call(self, name: str):
        """The region's compiled forward itself, without the recorder's wrapper
        (nothing recorded, no mode set aside)."""
        return self.originals[name]

    def _level(self) -> int:
        # An isolated region below kernel level is still recorded, as
        # isolation.py records a lone op.
        return capi.LEVEL_KERNEL if self.rec._mode is not None else capi.LEVEL_STEP

    def _record(self, io: int, items) -> None:
        self.rec.sink.tensors_(self._level(), REGION_OP, io, items)

    def _occurrence(self) -> int:
        return self._occurrence_of(self.rec.sink.scope or "", REGION_OP)

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
                occurrence = rec._occurrence()
                rec._record(capi.IO_IN, flatten("input", list(args)) + flatten("input", kwargs) + rng_inputs())
                rec.rec.log_call(rec.rec.sink.scope or "", REGION_OP, occurrence, args, kwargs)
            pinned = rec._eager_graph(module, args, kwargs)
            pinning = sink.pins and sink.active
            kernels = (wanted and not rec.isolating) or pinning
            with mode_set_aside(mode), rec._generated_kernels(sink.scope or "", occurrence if wanted else 0,
                                                              kernels):
                rec.calls += 1
                out = inner(*args, **kwargs)
            if pinned is not None:
                # An op of the eager graph took a pin: the region's results are
                # the eager graph's, as an eager model's would be downstream of
                # the pinned op; the compiled code's own call of that op cannot
                # be pinned from outside.
                with mode_set_aside(mode), torch.no_grad():
                    for (_, t), (_, e) in zip(flatten("out", out), flatten("out", pinned)):
                        t.copy_(e)
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

    @contextlib.contextmanager
    def _generated_kernels(self, scope: str, occurrence: int, wanted: bool):
        """While the region's compiled call runs (its call `occurrence` in
        `scope`), each of inductor's generated kernels it calls is one op in
        <scope>/inductor (record_kernel), when `wanted`."""
        if not wanted:
            yield
            return
        with inductor.watch(lambda call: self.record_kernel(call, f"{scope}/{INDUCTOR}", occurrence)):
            yield

    def record_kernel(self, call: "inductor.KernelCall", scope: str, region_occurrence: int):
        """Runs one generated kernel call as an op of `scope`: at kernel level
        `in` the tensors it reads as they were before it ran, `out` those it
        wrote, after; where pins may apply, its outputs take their pins in
        place before the next kernel reads them. Under a capture its call is
        logged with what isolating it needs (isolation.py): the region's call
        (or compiled backward node) it ran in and its place among that call's
        kernels, and how to allocate the buffers it only writes. Under
        discover() it is only run and listed."""
        if self.discovered is not None:
            self.discovered.append((scope, region_occurrence, call))
            return call.run()
        rec = self.rec
        sink = rec.sink
        previous = sink.set_scope(scope)
        try:
            # Not in an isolation of the region's one op, which records that op only.
            record = rec._mode is not None and not self.isolating and sink.active and \
                sink.native.wants(capi.LEVEL_KERNEL)
            if record:
                inputs = call.inputs()
                sink.tensors_(capi.LEVEL_KERNEL, call.name, capi.IO_IN, inputs)
                read = {p for p, _ in inputs}
                layout = {p: {"shape": list(t.shape), "stride": list(t.stride()), "offset": int(t.storage_offset()),
                              "dtype": str(t.dtype).replace("torch.", ""), "device": str(t.device)}
                          for p, t in call.outputs() if p not in read}
                rec.log_call(scope, call.name, self._occurrence_of(scope, call.name), call.args, {},
                             [p for p, _ in call.params],
                             {"region_occurrence": region_occurrence, "index": call.index, "allocate": layout})
            out = call.run()
            outputs = call.outputs()
            if sink.pins and sink.active:
                sink.take_pins(call.name, outputs)  # in place: the kernels after it read the pinned bytes
            if record:
                sink.tensors_(capi.LEVEL_KERNEL, call.name, capi.IO_OUT, outputs)
            return out
        finally:
            sink.set_scope(previous)

    @contextlib.contextmanager
    def discover(self):
        """While the body runs (a region's forward and backward, the sink
        inactive), each generated kernel a compiled backward node of a region
        calls is run and listed as (scope, the occurrence of the node it ran
        in, KernelCall), placed as a recording places it (record_kernel's
        region_occurrence, and the call's index among its node's kernels).
        Nothing is recorded or pinned. Yields the list; the occurrences
        count from 0 in it."""
        found: List = []
        self.discovered = found
        if self.rec._ops:
            self.rec._ops.new_step()
        try:
            yield found
        finally:
            self.discovered = None
            if self.rec._ops:
                self.rec._ops.new_step()

    def _occurrence_of(self, scope: str, op: str) -> int:
        counts = self.rec._mode.calls if self.rec._mode is not None else {}
        occurrence = counts.get((scope, op), 0)
        counts[(scope, op)] = occurrence + 1
        return occurrence

    def _eager_graph(self, module: torch.nn.Module, args, kwargs):
        """The region's graph run eagerly under the dispatch mode, in
        <scope>/eager, when the mode records kernels there or pins may apply:
        each ATen or custom op of it is then recorded (and captured, and
        isolated as one op: bisect's kernel pass and confirm name it there)
        and asked for its pins as an eager model's are. Returns its results
        when one of its ops took a pin, else None: the job goes on with the
        compiled call's, which runs next from the same RNG states and buffers
        (both put back). Not in an isolation of the region's one op, which
        records that op only."""
        from torch.utils._python_dispatch import _get_current_dispatch_mode
        rec = self.rec
        mode, sink = rec._active_mode(), rec.sink
        eager = getattr(module, "_orig_mod", None)
        if eager is None or mode is None or self.isolating or _get_current_dispatch_mode() is not mode \
                or not sink.active:
            return None
        sub = f"{sink.scope or ''}/{EAGER}"
        prefix = rec.native.scope_prefix()
        recording = rec._mode is not None and (not prefix or sub.startswith(prefix))
        if not (recording or sink.pins):
            return None  # a replay recording another scope: nothing of it would be kept
        rng = rng_inputs()
        buffers = [(b, b.detach().clone()) for b in eager.buffers()]
        previous = sink.set_scope(sub)
        taken = sink.pins_taken
        out = None
        try:
            with torch.no_grad():
                out = eager(*args, **kwargs)
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            # A graph that runs compiled but not eagerly under the mode: its
            # region stays one op, as below kernel level.
            out = None
        finally:
            sink.set_scope(previous)
            with mode_set_aside(mode), torch.no_grad():
                for b, kept in buffers:
                    b.copy_(kept)
                torch.set_rng_state(rng[0][1])
                if len(rng) > 1:
                    torch.cuda.set_rng_state(rng[1][1])
        return out if sink.pins_taken > taken else None

    def _watch_backward(self, nodes: List, bwd: str, leave: bool) -> None:
        """The compiled backward nodes of one region call: each runs in
        bwd/<region> without the dispatch mode and is recorded at kernel level
        as one REGION_OP call, the generated kernels it calls one by one in
        bwd/<region>/inductor (record_kernel). `leave`: the last of them
        leaves the scope."""
        rec = self.rec
        left = [len(nodes)]

        def watch(node) -> None:
            state = {}

            def pre(grad_outputs):
                hooks = rec._hooks
                scope = bwd if hooks is None or hooks.only is None else rec.sink.scope
                state["previous"] = rec.sink.set_scope(scope)
                # Counted whether recorded or not: a discovery (discover())
                # places the node's kernels as a recording of it does.
                occurrence = self._occurrence()
                if rec.sink.active and rec.sink.native.wants(capi.LEVEL_KERNEL):
                    rec.sink.tensors_(capi.LEVEL_KERNEL, REGION_OP, capi.IO_IN,
                                      flatten("grad_output", list(grad_outputs)))
                state["mode"] = contextlib.ExitStack()
                state["mode"].enter_context(mode_set_aside(rec._active_mode()))
                # Its generated kernels one by one, in <scope>/inductor as the
                # forward's (record_kernel decides what is recorded and pinned).
                state["mode"].enter_context(self._generated_kernels(
                    scope, occurrence, rec.sink.active or self.discovered is not None))
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
                    hooks.leave_bwd(bwd)
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
