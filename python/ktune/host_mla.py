"""sparse_mla_decode on the host CPU with NumPy arrays (the LLVM host backend, libktune_host.so): the same problem,
layouts and semantics as the GPU op (docs/sparse_mla_decode.md); synchronous. Needs numpy."""

from __future__ import annotations

import ctypes
import json
import math

import numpy as np

from . import _lib
from .errors import invalid, refuse_broadcast, refuse_readonly
from .mla import canonical

_FAM = "sparse_mla_decode"


def _need(name, a, shape, dtypes, what="", strided=False):
    """Shape / dtype / layout check of one host array (None in `shape` = any extent; strided: rows may be
    strided, the last dimension contiguous)."""
    if not isinstance(a, np.ndarray):
        raise invalid(f"{_FAM}: {name}: expected a numpy.ndarray on the host path, got {type(a).__name__}")
    if a.ndim != len(shape) or any(w is not None and int(g) != w for g, w in zip(a.shape, shape)):
        want = "[" + ", ".join("*" if w is None else str(w) for w in shape) + "]"
        raise invalid(f"{_FAM}: {name}: expected shape {want}{what}, got {list(a.shape)}")
    if a.dtype not in dtypes:
        raise invalid(f"{_FAM}: {name}: expected dtype {' or '.join(str(np.dtype(d)) for d in dtypes)}, got {a.dtype}")
    if strided:
        if any(st % a.itemsize for st in a.strides):
            raise invalid(f"{_FAM}: {name}: expected strides in whole elements of {a.itemsize} bytes, got strides "
                          f"{a.strides} bytes")
        if a.shape[-1] > 1 and a.strides[-1] != a.itemsize:
            raise invalid(f"{_FAM}: {name}: expected the last dimension contiguous, got strides {a.strides} bytes")
        refuse_broadcast(f"{_FAM}: {name}", a.shape, a.strides)
    elif not a.flags["C_CONTIGUOUS"]:
        raise invalid(f"{_FAM}: {name}: expected a C-contiguous array")


def sparse_mla_decode(problem, q, kv_cache, indices, *, sinks=None, softmax_scale=None, out=None, lse=None,
                      return_lse=False, config=None, num_splits=0, threads=0, runtime=None):
    """Sparse MLA decode on the CPU. Arrays (C-contiguous NumPy, except q): q [num_tokens, num_heads,
    kv_lora_rank + rope_dim] uint16 (bf16 bits, ktune.numerics.float_to_bf16; rows may be strided, multiples of
    8 elements apart); kv_cache [num_pages, page_size, row_bytes] uint8
    (fp8_ds_mla rows) or [num_pages, page_size, kv_lora_rank + rope_dim] uint16 (bf16); indices [num_tokens,
    topk] int32 physical slots page * page_size + offset, -1 = skip (any other slot outside the cache is an
    InvalidArgumentError naming the token and entry); sinks [num_heads] float32 or None. Returns out
    [num_tokens, num_heads, kv_lora_rank] uint16 (bf16 bits), or (out, lse) with return_lse / an lse array."""
    from .runtime import runtime as default_runtime
    info = canonical(problem)
    rt = runtime or default_runtime()
    L = _lib.require("ktune_sparse_mla_decode_host", "ktune_sparse_mla_args_default")
    dq = info.kv_lora_rank + info.rope_dim
    if not isinstance(q, np.ndarray) or q.ndim != 3:
        raise invalid(f"{_FAM}: q: expected a [num_tokens, {info.num_heads}, {dq}] uint16 (bf16) array")
    T = int(q.shape[0])
    _need("q", q, (T, info.num_heads, dq), (np.uint16,), " (bf16 bits)", strided=True)
    if not isinstance(kv_cache, np.ndarray) or kv_cache.ndim != 3:
        raise invalid(f"{_FAM}: kv_cache: expected a 3-d [num_pages, {info.page_size}, row] array")
    if info.kv_dtype == "fp8ds":
        _need("kv_cache", kv_cache, (None, info.page_size, info.row_bytes), (np.uint8,),
              f" (fp8_ds_mla rows of {info.row_bytes} bytes)")
    else:
        _need("kv_cache", kv_cache, (None, info.page_size, dq), (np.uint16,), " (bf16 bits)")
    _need("indices", indices, (T, info.topk), (np.int32,))
    if sinks is not None:
        _need("sinks", sinks, (info.num_heads,), (np.float32,))
    if out is None:
        out = np.empty((T, info.num_heads, info.kv_lora_rank), dtype=np.uint16)
    _need("out", out, (T, info.num_heads, info.kv_lora_rank), (np.uint16,), " (bf16 bits)")
    if lse is None and return_lse:
        lse = np.empty((T, info.num_heads), dtype=np.float32)
    if lse is not None:
        _need("lse", lse, (T, info.num_heads), (np.float32,))
    want_lse = lse is not None
    refuse_readonly(f"{_FAM}: out", out)
    refuse_readonly(f"{_FAM}: lse", lse)
    if T == 0:
        return (out, lse) if want_lse else out
    a = _lib._MlaArgs()
    L.ktune_sparse_mla_args_default(ctypes.byref(a))
    ptr = (lambda x: None if x is None else x.ctypes.data)
    a.q, a.kv_cache, a.indices, a.sinks, a.out, a.lse = (ptr(q), ptr(kv_cache), ptr(indices), ptr(sinks), ptr(out),
                                                         ptr(lse))
    a.num_tokens, a.num_pages = T, int(kv_cache.shape[0])
    if not q.flags["C_CONTIGUOUS"]:  # the library checks the strides (multiples of 8 elements)
        a.q_stride_token, a.q_stride_head = q.strides[0] // q.itemsize, q.strides[1] // q.itemsize
    a.softmax_scale = float(softmax_scale) if softmax_scale is not None else 1.0 / math.sqrt(dq)
    a.config = _lib.cstr(config) if config else None
    a.num_splits = _lib.c_int("sparse_mla_decode: num_splits", num_splits)
    _lib.check(L.ktune_sparse_mla_decode_host(rt.handle, info.key.encode(), ctypes.byref(a),
                                                 _lib.c_int(f"{_FAM}: threads", threads)),
               "ktune_sparse_mla_decode_host")
    return (out, lse) if want_lse else out


def sparse_mla_decode_plan(problem, num_tokens, *, config=None, num_splits=0, threads=0, runtime=None) -> dict:
    """What a host call would run: {"config", "source" ("forced"/"tuned"/"default"), "num_splits", "threads",
    "workspace_bytes"}."""
    from .runtime import runtime as default_runtime
    info = canonical(problem)
    rt = runtime or default_runtime()
    L = _lib.require("ktune_sparse_mla_decode_host_plan")
    out = ctypes.c_char_p()
    _lib.check(L.ktune_sparse_mla_decode_host_plan(rt.handle, info.key.encode(),
                                                   _lib.c_int(f"{_FAM}: num_tokens", num_tokens), _lib.cstr(config),
                                                   _lib.c_int(f"{_FAM}: num_splits", num_splits),
                                                   _lib.c_int(f"{_FAM}: threads", threads), ctypes.byref(out)),
               "ktune_sparse_mla_decode_host_plan")
    return json.loads(out.value.decode())
