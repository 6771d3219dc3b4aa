"""Inductor's generated kernels, called one by one (torch 2.x, CPU).

Inductor writes a compiled graph as a Python module (its output code, what
TORCH_LOGS=output_code prints) whose `call` function allocates the buffers
(empty_strided_cpu) and calls each generated kernel by its global name
(cpp_fused_sum_0 = async_compile.cpp_pybinding([...], '''... void
kernel(const float* in_ptr0, float* out_ptr0) ...''')). Those globals are
looked up when `call` runs, so a wrapper put in the module's namespace sees
every call of a kernel with its arguments, and calls the kernel itself with
them: the generated code and its arithmetic are what they were, nothing is
compiled again, and inductor's cache keys are untouched.

watch(callback): while the body runs, every call of a generated kernel goes
to callback(call) (a KernelCall: the kernel's name, its arguments, what each
parameter is, run() to call it); outside a watch the wrappers call the kernel
directly. The modules loaded before are wrapped when a watch begins, the
ones inductor loads during it (a region compiled or read from the cache in
that call) as they are loaded (PyCodeCache.load_by_key_path).

What each argument is comes from the kernel's C++ signature, as inductor
names its parameters: in_ptr<i> it reads, out_ptr<i> it writes (without
reading), in_out_ptr<i> it reads and writes, anything else a scalar (a size).
A buffer `call` allocates while a watch runs is zero-filled as allocated:
bytes no kernel has written yet (an in_out_ptr a fused kernel computes in
place from a value of its own, the part of a buffer another kernel fills)
are then the same in every run instead of whatever the allocator left there,
and a correct kernel never reads them, so the results are unchanged.

Where the mechanism is missing (torch 1.13, an inductor without
PyCodeCache.load_by_key_path or cpp_pybinding kernels, the C++ wrapper
config.cpp_wrapper, triton kernels on CUDA) nothing is wrapped and
watch() sees no call: a region is then recorded as its one op only."""
from __future__ import annotations

import contextlib
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

import torch

# How inductor's Python wrapper declares a C++ kernel with Python bindings in
# its output code (torch 2.1 and later).
_CPP_KERNEL = re.compile(r"^(\w+) = async_compile\.cpp_pybinding\(\[([^\]]*)\],\s*'''", re.M)
_SIGNATURE = re.compile(r'extern\s+"C"\s+void\s+kernel\(([^)]*)\)')
# The allocators `call` gets its buffers from (codegen/wrapper.py's preamble).
_ALLOCATORS = ("empty_strided_cpu", "empty_strided_cuda", "empty_strided")

IN, OUT, INOUT, SCALAR = "in", "out", "inout", "scalar"


def _param_kind(ctype: str, name: str) -> str:
    if "*" not in ctype:
        return SCALAR
    if name.startswith("in_out_ptr"):
        return INOUT
    if name.startswith("out_ptr"):
        return OUT
    if ctype.strip().startswith("const") or name.startswith("in_ptr"):
        return IN
    return INOUT  # a pointer it may write, of a name inductor did not use before: read and written


def kernel_params(source: str) -> Dict[str, List[Tuple[str, str]]]:
    """{kernel name: [(parameter name, kind)]} of the C++ kernels an output
    code module declares; a kernel whose signature does not parse is left out
    (and so is not recorded)."""
    found: Dict[str, List[Tuple[str, str]]] = {}
    starts = list(_CPP_KERNEL.finditer(source))
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(source)
        sig = _SIGNATURE.search(source, m.end(), end)
        if sig is None:
            continue
        argtypes = [t.strip().strip("'\"") for t in m.group(2).split(",") if t.strip()]
        params = []
        for declared in (p.strip() for p in sig.group(1).split(",") if p.strip()):
            ctype, _, name = declared.rpartition(" ")
            params.append((name, _param_kind(ctype, name)))
        if len(params) == len(argtypes):
            found[m.group(1)] = params
    return found


class KernelCall:
    """One call of a generated kernel: `name` as inductor named it, `args`
    as `call` passed them, `params` [(parameter name, kind)], `source` the
    output code module's file, `index` its place among the kernel calls of
    the watch."""

    def __init__(self, name: str, fn: Callable, args: Tuple, params, source: str, index: int):
        self.name, self.fn, self.args, self.params, self.source, self.index = name, fn, args, params, source, index

    def tensors(self, kinds) -> List[Tuple[str, torch.Tensor]]:
        return [(p, a) for (p, kind), a in zip(self.params, self.args)
                if kind in kinds and isinstance(a, torch.Tensor)]

    def inputs(self) -> List[Tuple[str, torch.Tensor]]:
        """The tensors it reads: in_ptr and in_out_ptr."""
        return self.tensors((IN, INOUT))

    def outputs(self) -> List[Tuple[str, torch.Tensor]]:
        """The tensors it writes: out_ptr and in_out_ptr."""
        return self.tensors((OUT, INOUT))

    def run(self) -> Any:
        return self.fn(*self.args)


class _Watch:
    def __init__(self):
        self.callback: Optional[Callable[[KernelCall], Any]] = None
        self.fill = False  # zero-fill the buffers `call` allocates (watch's fill)
        self.count = 0
        self.installed = False


_watch = _Watch()


def _wrap_kernel(name: str, fn: Callable, params, source: str) -> Callable:
    def kernel(*args):
        callback = _watch.callback
        if callback is None:
            return fn(*args)
        call = KernelCall(name, fn, args, params, source, _watch.count)
        _watch.count += 1
        return callback(call)

    kernel.dtrace_kernel = fn  # type: ignore[attr-defined]
    return kernel


def _wrap_allocator(fn: Callable) -> Callable:
    def allocate(*args, **kwargs):
        t = fn(*args, **kwargs)
        if _watch.fill and isinstance(t, torch.Tensor):
            t.untyped_storage().fill_(0)
        return t

    allocate.dtrace_kernel = fn  # type: ignore[attr-defined]
    return allocate


def _wrap_module(mod) -> None:
    """Wraps the generated kernels and the allocators of one output code
    module, once."""
    if getattr(mod, "_dtrace_wrapped", False):
        return
    mod._dtrace_wrapped = True
    path = getattr(mod, "__file__", None)
    if not path or not callable(getattr(mod, "call", None)):
        return  # not a graph's output code (a triton kernel's module, a benchmark)
    try:
        with open(path, encoding="utf-8") as f:
            params = kernel_params(f.read())
    except OSError:
        return
    for name, kernel in params.items():
        fn = getattr(mod, name, None)
        if callable(fn) and not hasattr(fn, "dtrace_kernel"):
            setattr(mod, name, _wrap_kernel(name, fn, kernel, path))
    if params:
        for name in _ALLOCATORS:
            fn = getattr(mod, name, None)
            if callable(fn) and not hasattr(fn, "dtrace_kernel"):
                setattr(mod, name, _wrap_allocator(fn))


def _code_cache():
    try:
        from torch._inductor.codecache import PyCodeCache
    except ImportError:  # torch 1.13, or an inductor that cannot be imported here
        return None
    loader = PyCodeCache.__dict__.get("load_by_key_path")
    return PyCodeCache if isinstance(loader, classmethod) and hasattr(PyCodeCache, "modules") else None


def available() -> bool:
    """Whether this torch's generated kernels can be watched."""
    return _code_cache() is not None


def _install() -> bool:
    """Wraps every output code module loaded, and from now on each one as
    inductor loads it. Once per process."""
    cache = _code_cache()
    if cache is None:
        return False
    if not _watch.installed:
        original = cache.__dict__["load_by_key_path"].__func__

        def load_by_key_path(cls, *args, **kwargs):
            mod = original(cls, *args, **kwargs)
            _wrap_module(mod)
            return mod

        cache.load_by_key_path = classmethod(load_by_key_path)
        _watch.installed = True
    for mod in list(cache.modules):
        _wrap_module(mod)
    return True


@contextlib.contextmanager
def watch(callback: Callable[[KernelCall], Any], fill: bool = True):
    """Every generated kernel called in the body goes to callback(call),
    which runs it (call.run()) and returns what it returned. `fill`: the
    buffers the generated code allocates are zero-filled (for recording;
    a listing leaves them as they are, its profile free of the fills).
    Yields whether the kernels can be watched at all in this torch."""
    if not _install() or _watch.callback is not None:
        yield False
        return
    _watch.callback, _watch.fill, _watch.count = callback, fill, 0
    try:
        yield True
    finally:
        _watch.callback, _watch.fill = None, False

