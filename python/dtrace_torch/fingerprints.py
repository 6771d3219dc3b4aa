"""Tensors as the bytes libdtrace fingerprints: logical, contiguous, row-major order,
with the dtype names of dtrace-fp(5), as dtrace.arrays' views (view()). Host
tensors are hashed by libdtrace on the CPU; CUDA tensors on their device, on the
device's current stream, in one batch per group of records (dtrace.records.Sink),
never copied to the host to be hashed."""
from __future__ import annotations

from typing import Dict, Tuple

import torch

from dtrace.arrays import ArrayView

# dtrace-fp(5) dtype names. Types torch has only in some versions are added when present.
_DTYPES: Dict[torch.dtype, str] = {
    torch.float64: "f64", torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8",
    torch.uint8: "u8", torch.bool: "bool", torch.complex64: "c64", torch.complex128: "c128",
}
for _name, _short in (("float8_e4m3fn", "f8e4m3"), ("float8_e5m2", "f8e5m2"), ("uint16", "u16"),
                      ("uint32", "u32"), ("uint64", "u64")):
    if hasattr(torch, _name):
        _DTYPES[getattr(torch, _name)] = _short


def dtype_name(dtype: torch.dtype) -> str:
    return _DTYPES.get(dtype) or str(dtype).replace("torch.", "")


_is_neg = getattr(torch.Tensor, "is_neg", lambda t: False)  # torch 1.10 and later


def logical(t: torch.Tensor) -> torch.Tensor:
    """The tensor's bytes in logical order: detached, conjugation and negation bits
    resolved (where this torch has them), contiguous."""
    if t.layout == torch.strided and not t.is_complex() and t.is_contiguous() and not _is_neg(t):
        return t  # the common case, in three calls: already its logical bytes
    t = t.detach()
    if hasattr(t, "resolve_conj"):
        t = t.resolve_conj()
    if hasattr(t, "resolve_neg"):
        t = t.resolve_neg()
    if getattr(t, "is_sparse", False) or t.layout != torch.strided:
        t = t.to_dense()
    return t if t.is_contiguous() else t.contiguous()


def nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def shape_of(t: torch.Tensor) -> Tuple[int, ...]:
    return tuple(t.shape)  # torch.Size: a tuple of ints


def host_fields(t: torch.Tensor):
    """view()'s (dtype, shape, address, nbytes, keep) of a tensor not on a CUDA
    device, without making the ArrayView (a step hands hundreds of parameters
    over this way: dtrace.records.Sink.host_fields); None for a CUDA tensor."""
    v = logical(t)
    if v.is_cuda:
        return None
    size = v.numel() * v.element_size()
    return dtype_name(v.dtype), tuple(v.shape), v.data_ptr() if size else 0, size, v


def view(t: torch.Tensor) -> ArrayView:
    """The tensor's logical bytes where they lie: a CUDA tensor's on its device,
    with the device's current stream (the one the tensor's producer ran on)."""
    v = logical(t)
    size = nbytes(v)
    if v.is_cuda:
        device = v.device.index
        stream = torch.cuda.current_stream(device).cuda_stream
        return ArrayView(dtype_name(v.dtype), shape_of(v), v.data_ptr() if size else 0, size, device, stream, v)
    return ArrayView(dtype_name(v.dtype), shape_of(v), v.data_ptr() if size else 0, size, None, None, v)
