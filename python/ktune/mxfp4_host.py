"""mxfp4_gemm on the host CPU with NumPy arrays (the LLVM host backend, libktune_host.so): the same problem, the
same prepacked weight layout and the same semantics as the GPU op; synchronous. Needs numpy."""

from __future__ import annotations

import ctypes

import numpy as np

from . import _lib, mxfp4
from .errors import invalid, refuse_broadcast, refuse_readonly

_STORAGE = {"bf16": np.uint16, "fp16": np.float16}


def host_weight(w_packed, w_scale) -> mxfp4.Mxfp4Weight:
    """Prepacks a canonical MXFP4 weight (w_packed [E, n, k/2] uint8, w_scale [E, n, k/32] uint8 e8m0; 2-D: E = 1)
    for the host op: a ktune.mxfp4.Mxfp4Weight holding NumPy arrays. Done once at load."""
    pw, ps = mxfp4.prepack(w_packed, w_scale)
    wp = np.asarray(w_packed)
    e = 1 if wp.ndim == 2 else wp.shape[0]
    return mxfp4.Mxfp4Weight(wp.shape[-2], 2 * wp.shape[-1], e, pw, ps, mxfp4.layout_version())


def _array(name, a, dtype, shape=None, strided_rows=False):
    """strided_rows: a 2-D array whose rows may be strided (the last dimension contiguous)."""
    if not isinstance(a, np.ndarray):
        raise invalid(f"mxfp4_gemm: {name}: expected a numpy.ndarray on the host path, got {type(a).__name__}")
    if a.dtype != dtype:
        raise invalid(f"mxfp4_gemm: {name}: expected dtype {np.dtype(dtype).name}, got {a.dtype}")
    if strided_rows:
        if a.ndim != 2 or (a.shape[1] > 1 and a.strides[1] != a.itemsize) or a.strides[0] % a.itemsize:
            raise invalid(f"mxfp4_gemm: {name}: expected rows with a contiguous last dimension, got strides "
                          f"{a.strides} bytes")
        refuse_broadcast(f"mxfp4_gemm: {name}", a.shape, a.strides)
    elif not a.flags["C_CONTIGUOUS"]:
        raise invalid(f"mxfp4_gemm: {name}: expected a C-contiguous array")
    if shape is not None and tuple(a.shape) != tuple(shape):
        raise invalid(f"mxfp4_gemm: {name}: expected shape {tuple(shape)}, got {tuple(a.shape)}")
    return a


def mxfp4_gemm(problem, a, weight, *, bias=None, expert_offsets=None, out=None, config=None, threads=0,
               runtime=None):
    """C[m, n] = A[m, k] W[n, k]^T (+ bias) on the CPU. a [m, k] (bf16 as uint16 bit patterns,
    ktune.numerics.float_to_bf16; fp16 numpy.float16; rows may be strided: lda = the row stride, a multiple of 8
    elements), weight from host_weight (or ktune.mxfp4.Mxfp4Weight with
    NumPy packed/scales), bias [num_experts, n] (or [n]) in the output dtype, expert_offsets [E + 1] int32 (grouped
    problems; rows sorted by expert). Returns C [m, n], or writes out= in place."""
    from .runtime import runtime as default_runtime
    info = mxfp4.canonical(problem)
    rt = runtime or default_runtime()
    if not isinstance(a, np.ndarray) or a.ndim != 2:
        raise invalid(f"mxfp4_gemm: a: expected a 2-D numpy.ndarray [m, k], got "
                      f"{getattr(a, 'shape', type(a).__name__)}")
    m = a.shape[0]
    _array("a", a, _STORAGE[info.a_dtype], (m, info.k), strided_rows=True)
    mxfp4.check_weight(info, weight, "ktune.mxfp4_host.host_weight")
    wb, sb = mxfp4.packed_bytes(info.n, info.k, info.num_experts)
    packed = _array("weight.packed", weight.packed, np.uint8)
    scales = _array("weight.scales", weight.scales, np.uint8)
    if packed.size != wb:
        raise invalid(f"mxfp4_gemm: weight.packed: expected {wb} bytes (the prepacked weight), got {packed.size}")
    if scales.size != sb:
        raise invalid(f"mxfp4_gemm: weight.scales: expected {sb} bytes (the prepacked scales), got {scales.size}")
    if out is None:
        out = np.empty((m, info.n), dtype=_STORAGE[info.out_dtype])
    _array("out", out, _STORAGE[info.out_dtype], (m, info.n))
    refuse_readonly("mxfp4_gemm: out", out)
    if bias is not None:
        _array("bias", bias, _STORAGE[info.out_dtype])
        if bias.size != info.num_experts * info.n:
            raise invalid(f"mxfp4_gemm: bias: expected {info.num_experts} x {info.n} values, got {bias.size}")
    if info.grouped:
        if expert_offsets is None:
            raise invalid("mxfp4_gemm: expert_offsets: expected int32 [num_experts + 1] for a grouped problem, got None")
        _array("expert_offsets", expert_offsets, np.int32, (info.num_experts + 1,))
    elif expert_offsets is not None:
        raise invalid("mxfp4_gemm: expert_offsets: expected None (dense problem: num_experts = 1)")
    args = _lib._Mxfp4Args()
    L = _lib.require("ktune_mxfp4_gemm_host", "ktune_mxfp4_grouped_gemm_host")
    L.ktune_mxfp4_args_default(ctypes.byref(args))
    args.a = a.ctypes.data
    if not a.flags["C_CONTIGUOUS"] and m > 1:  # the library checks lda (>= k, a multiple of 8)
        args.lda = a.strides[0] // a.itemsize
    args.layout_version = int(weight.layout_version)
    args.weight_packed = packed.ctypes.data
    args.weight_scales = scales.ctypes.data
    args.bias = bias.ctypes.data if bias is not None else None
    args.c = out.ctypes.data
    args.m = _lib.c_int("mxfp4_gemm: m (rows of a)", m)
    args.expert_offsets = expert_offsets.ctypes.data if info.grouped else None
    args.config = _lib.cstr(config)
    fn = L.ktune_mxfp4_grouped_gemm_host if info.grouped else L.ktune_mxfp4_gemm_host
    _lib.check(fn(rt.handle, info.key.encode(), ctypes.byref(args), _lib.c_int("mxfp4_gemm: threads", threads)),
               "ktune_mxfp4_grouped_gemm_host" if info.grouped else "ktune_mxfp4_gemm_host")
    return out
