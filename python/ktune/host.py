"""xqa_decode on the host CPU with NumPy arrays (the LLVM host backend, libktune_host.so): the same problem,
layouts and semantics as the GPU op; synchronous. Needs numpy."""

from __future__ import annotations

import ctypes
import json

import numpy as np

from . import _lib
from .errors import invalid, refuse_readonly
from .xqa import Desc, build_args, canonical

_TAGS = {"float16": "fp16", "float32": "f32", "int32": "i32", "uint32": "u32", "uint16": "u16", "int16": "i16",
         "uint8": "u8", "bfloat16": "bf16", "float8_e4m3fn": "e4m3"}


def _desc(name, a):
    if a is None:
        return None
    if not isinstance(a, np.ndarray):
        raise invalid(f"xqa_decode: {name}: expected a numpy.ndarray on the host path, got {type(a).__name__}")
    tag = _TAGS.get(a.dtype.name, a.dtype.name)
    strides = tuple(s // a.itemsize for s in a.strides) if all(s % a.itemsize == 0 for s in a.strides) else None
    return Desc(tuple(a.shape), tag, bool(a.flags["C_CONTIGUOUS"]), a.ctypes.data, "cpu", strides)


def _scale_desc(name, v):
    """A scale given as an array (one float32) is read through its pointer, as a device-held scale is."""
    return _desc(name, v) if isinstance(v, np.ndarray) else v


def split_cache(kv_cache):
    """kv_cache as an array, or the pair (k_cache, v_cache) -> (kv_cache, k_cache, v_cache)."""
    if isinstance(kv_cache, (tuple, list)):
        if len(kv_cache) != 2:
            raise invalid(f"xqa_decode: kv_cache: expected an array or a (k_cache, v_cache) pair, got a sequence of "
                          f"{len(kv_cache)}")
        return None, kv_cache[0], kv_cache[1]
    return kv_cache, None, None


def _check_indices(info, block_tables, seq_lens, q_cu_seq_lens, num_pages, num_tokens, max_seq_len, q_len_per_req):
    """Host data may be read here (the GPU path never reads device data): indices that would read out of bounds
    are refused before the kernel runs."""
    if (seq_lens < 0).any() or (seq_lens > max_seq_len).any():
        i = int(np.argmax((seq_lens < 0) | (seq_lens > max_seq_len)))
        raise invalid(f"xqa_decode: seq_lens[{i}]: expected 0..max_seq_len ({max_seq_len}), got {int(seq_lens[i])}")
    if q_cu_seq_lens is not None:
        qlens = np.diff(q_cu_seq_lens.astype(np.int64))
        if q_cu_seq_lens[0] != 0 or (qlens < 0).any() or q_cu_seq_lens[-1] != num_tokens:
            raise invalid(f"xqa_decode: q_cu_seq_lens: expected non-decreasing offsets from 0 to num_tokens "
                          f"({num_tokens}), got {q_cu_seq_lens.tolist()[:8]}...")
    else:
        qlens = np.full(seq_lens.shape, q_len_per_req, dtype=np.int64)
    bad = (qlens > info.max_q_len) | ((seq_lens > 0) & (seq_lens < qlens))
    if bad.any():
        i = int(np.argmax(bad))
        raise invalid(f"xqa_decode: request {i}: q_len {int(qlens[i])} must be <= max_q_len ({info.max_q_len}) and "
                      f"<= seq_lens[{i}] ({int(seq_lens[i])})")
    pages_needed = (seq_lens.astype(np.int64) + info.page_size - 1) // info.page_size
    if (pages_needed > block_tables.shape[1]).any():
        i = int(np.argmax(pages_needed > block_tables.shape[1]))
        raise invalid(f"xqa_decode: block_tables: request {i} needs {int(pages_needed[i])} pages, rows hold "
                      f"{block_tables.shape[1]}")
    used = np.arange(block_tables.shape[1])[None, :] < pages_needed[:, None]
    vals = block_tables[used]
    if vals.size and (vals.min() < 0 or vals.max() >= num_pages):
        raise invalid(f"xqa_decode: block_tables: pages in use must be 0..{num_pages - 1}, got "
                      f"{int(vals.min())}..{int(vals.max())}")


def xqa_decode(problem, q, kv_cache, block_tables, seq_lens, *, max_seq_len=None, q_cu_seq_lens=None, mask=None,
               sinks=None, softmax_scale=None, q_scale=1.0, k_scale=1.0, v_scale=1.0, o_scale=1.0, softcap=0.0,
               window_left=-1, out=None, lse=None, config=None, num_splits=0, threads=0, runtime=None):
    """Paged decode attention on the CPU. Arrays (NumPy): q [num_tokens, num_q_heads, head_dim] (head_dim
    contiguous, any token and head strides, e.g. a slice of a fused QKV buffer), kv_cache [num_pages, 2,
    num_kv_heads, page_size, head_dim] (HND) or [num_pages, 2, page_size, num_kv_heads, head_dim] (NHD), or the
    pair (k_cache, v_cache) of [num_pages, <page>] arrays with dense, equally strided pages (kv[0], kv[1] of a
    [2, num_pages, ...] array, kv[:, 0], kv[:, 1] of the combined one, or two arrays), block_tables [batch,
    max_pages_per_req] int32, seq_lens [batch] int32, q_cu_seq_lens [batch+1] int32 (ragged) or None, mask
    (explicit) uint32 [num_tokens] (max_q_len <= 32) or [num_tokens, 2] (max_q_len 33..64), sinks [num_q_heads]
    float32; out may be strided like q. A scale is a number or a float32 array of one element (read through its
    pointer at the call, as a device-held scale on the GPU). bf16 data is uint16 bit patterns
    (ktune.numerics.float_to_bf16), e4m3 uint8 codes, fp16 numpy.float16; other arrays C-contiguous. Returns out,
    or (out, lse) when the problem writes LSE."""
    from .runtime import runtime as default_runtime
    info = canonical(problem)
    rt = runtime or default_runtime()
    for name, a in (("block_tables", block_tables), ("seq_lens", seq_lens), ("q_cu_seq_lens", q_cu_seq_lens)):
        if a is not None and not isinstance(a, np.ndarray):
            raise invalid(f"xqa_decode: {name}: expected a numpy.ndarray on the host path, got {type(a).__name__}")
    if max_seq_len is None:
        max_seq_len = int(seq_lens.max()) if isinstance(seq_lens, np.ndarray) and seq_lens.size else 1
        max_seq_len = max(max_seq_len, 1)
    if out is None and isinstance(q, np.ndarray) and q.ndim == 3:
        from .numerics import storage_dtype
        out = np.empty((q.shape[0], info.num_q_heads, info.head_dim), dtype=storage_dtype(info.out_dtype))
    if lse is None and info.lse and isinstance(q, np.ndarray):
        lse = np.empty((q.shape[0], info.num_q_heads), dtype=np.float32)
    refuse_readonly("xqa_decode: out", out)
    refuse_readonly("xqa_decode: lse", lse)
    kv, k_cache, v_cache = split_cache(kv_cache)
    args, batch, num_tokens = build_args(
        info, _desc("q", q), _desc("kv_cache", kv), _desc("block_tables", block_tables),
        _desc("seq_lens", seq_lens), _desc("q_cu_seq_lens", q_cu_seq_lens), _desc("mask", mask),
        _desc("sinks", sinks), _desc("out", out), _desc("lse", lse), max_seq_len, softmax_scale,
        _scale_desc("q_scale", q_scale), _scale_desc("k_scale", k_scale), _scale_desc("v_scale", v_scale),
        _scale_desc("o_scale", o_scale), softcap, window_left, config, num_splits,
        k_cache=_desc("k_cache", k_cache), v_cache=_desc("v_cache", v_cache))
    _check_indices(info, block_tables, seq_lens, q_cu_seq_lens, args.num_pages, num_tokens, max_seq_len,
                   args.q_len_per_req)
    _lib.check(_lib.lib().ktune_xqa_decode_host(rt.handle, info.key.encode(), ctypes.byref(args),
                                                         _lib.c_int("xqa_decode: threads", threads)),
               "ktune_xqa_decode_host")
    return (out, lse) if info.lse else out


def xqa_decode_plan(problem, batch, max_seq_len, *, config=None, num_splits=0, threads=0, runtime=None) -> dict:
    """What a host call would run: {"config", "source" ("forced"/"tuned"/"default"), "num_splits", "threads",
    "workspace_bytes"}."""
    from .runtime import runtime as default_runtime
    info = canonical(problem)
    rt = runtime or default_runtime()
    out = ctypes.c_char_p()
    _lib.check(_lib.lib().ktune_xqa_decode_plan(rt.handle, info.key.encode(), _lib.c_int("xqa_decode: batch", batch),
                                                _lib.c_int("xqa_decode: max_seq_len", max_seq_len),
                                                _lib.cstr(config), _lib.c_int("xqa_decode: num_splits", num_splits), 1,
                                                _lib.c_int("xqa_decode: threads", threads),
                                                ctypes.byref(out)), "ktune_xqa_decode_plan")
    return json.loads(out.value.decode())
