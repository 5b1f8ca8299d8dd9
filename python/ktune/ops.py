"""Prepared ops (ktune_op_prepare / ktune_op_run): the problem is validated once, and every call only checks its
tensors, writes their addresses into a cached argument struct and launches on the current torch stream.

  op = ktune.ops.XqaDecodeOp(ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32))
  op(q, kv_cache, block_tables, seq_lens, max_seq_len=4096, out=out)     # eager, graph-capturable

A call whose tensors have the shapes, dtypes, devices and layouts of an earlier call skips the full argument
check (the C side still checks every pointer and scalar); anything new goes through the complete check of
ktune.xqa.build_args, whose errors name the argument. The torch custom ops (ktune.torch_ops) run through these
objects. An op refers to its ktune.Runtime, which it keeps alive."""

from __future__ import annotations

import ctypes
import math
from typing import Optional

from . import _lib
from .errors import invalid
from .runtime import Runtime, problem_key, runtime as default_runtime


class Op(_lib.Owned):
    """A prepared op of any family over the C API. run(args) takes the family's ctypes argument struct (started
    from its *_args_default, as the structs in ktune._lib are). Closing its runtime closes it too; a closed op's
    calls fail with InvalidArgumentError."""

    def __init__(self, family: str, problem, rt: Optional[Runtime] = None):
        self.runtime = rt if rt is not None else default_runtime()
        self.family = family
        self.key = problem_key(family, problem)
        handle = ctypes.c_void_p()
        L = _lib.lib()
        _lib.check(L.ktune_op_prepare(self.runtime.handle, family.encode(), self.key.encode(), ctypes.byref(handle)),
                   "ktune_op_prepare")
        self._handle = handle
        self._run = L.ktune_op_run
        self._run_on_device = L.ktune_op_run_on_device
        self._free = L.ktune_op_free
        self.runtime._ops.add(self)

    def run(self, args_ref, stream: int = 0) -> None:
        """Launches with a ctypes.byref of the family's argument struct on `stream` (a CUstream as an int)."""
        status = self._run(self._handle, args_ref, stream)
        if status:
            _lib.check(status, "ktune_op_run")

    def set_pdl(self, enable: bool = True) -> None:
        """Programmatic dependent launch for this op's launches from now on (sm_90+; off by default): a launch may
        start while the kernel before it on the stream finishes, and waits on the GPU before touching memory, so
        results are unchanged (docs/ops.md). UnsupportedError for a family whose kernels do not wait."""
        _lib.check(_lib.lib().ktune_op_set_pdl(self._handle, 1 if enable else 0), "ktune_op_set_pdl")

    def plan(self, args_ref) -> dict:
        import json
        out = ctypes.c_char_p()
        _lib.check(_lib.lib().ktune_op_plan(self._handle, args_ref, ctypes.byref(out)), "ktune_op_plan")
        return json.loads(out.value.decode())

    def _release(self, handle):
        self._free(handle)


def torch_tensor():
    import torch
    return torch.Tensor


def _raw_stream_fn():
    import torch
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what torch's own extensions read
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


class XqaDecodeOp:
    """xqa_decode on torch CUDA tensors (layouts: docs/xqa_decode.md). Arguments as ktune.xqa_decode: kv_cache
    is the combined cache or the pair (k_cache, v_cache), q and out may be strided (head_dim contiguous), a scale
    a number or a one-element float32 tensor on q's device. `out` (and `lse` for problems that write it) are
    required here: allocate them once, as a CUDA graph needs."""

    _FIELDS = ("kv_cache", "k_cache", "v_cache", "block_tables", "seq_lens", "q_cu_seq_lens", "mask", "sinks", "lse",
               "workspace", "workspace_bytes", "softmax_scale", "q_scale", "k_scale", "v_scale", "o_scale",
               "q_scale_ptr", "k_scale_ptr", "v_scale_ptr", "o_scale_ptr", "softcap", "window_left")
    # what the full check derives from a call's signature (shapes, strides, options)
    _SHAPE_FIELDS = ("batch", "num_tokens", "q_len_per_req", "max_pages_per_req", "num_pages", "max_seq_len",
                     "num_splits", "q_stride_token", "q_stride_head", "out_stride_token", "out_stride_head",
                     "kv_page_stride")

    def __init__(self, problem, rt: Optional[Runtime] = None):
        from .xqa import canonical
        self.info = canonical(problem)
        self._op = Op("xqa_decode", self.info.key, rt)
        self._args = _lib._XqaArgs()
        _lib.lib().ktune_xqa_args_default(ctypes.byref(self._args))
        self._ref = ctypes.byref(self._args)
        self._seen = {}  # call signature -> (workspace bytes of its plan, its _SHAPE_FIELDS values, config bytes)
        self._sig = None  # the signature whose shape fields self._args holds
        self._stream = _raw_stream_fn()
        self._tensor = torch_tensor()
        self._ensure_device = _lib.lib().ktune_ensure_device
        self._default_scale = 1.0 / math.sqrt(self.info.head_dim)
        self._last = (object(),) * len(self._FIELDS)  # nothing written yet

    @property
    def key(self) -> str:
        return self.info.key

    def set_pdl(self, enable: bool = True) -> None:
        """Programmatic dependent launch for this op's launches (Op.set_pdl)."""
        self._op.set_pdl(enable)

    @classmethod
    def for_tensors(cls, q, kv_cache, *, layout: str = "hnd", out_dtype=None, rt: Optional[Runtime] = None,
                    **fields) -> "XqaDecodeOp":
        """The op of the problem these tensors hold, as an engine holds them: head_dim, num_q_heads and the q dtype
        from q [num_tokens, num_q_heads, head_dim] (strided or not); num_kv_heads, page_size and the KV dtype from
        the 5-D paged kv_cache (`layout` "hnd": [num_pages, 2, num_kv_heads, page_size, head_dim]; "nhd":
        [num_pages, 2, page_size, num_kv_heads, head_dim]) or from the pair (k_cache, v_cache) of [num_pages,
        <page>] tensors; out_dtype defaults to q's. `fields` are the remaining problem fields (max_q_len, mask,
        sinks, sliding_window, softcap, lse; see ktune.xqa_problem)."""
        if len(getattr(q, "shape", ())) != 3:
            raise invalid(f"xqa_decode: q: expected a 3-d [num_tokens, num_q_heads, head_dim] tensor, got shape "
                          f"{tuple(getattr(q, 'shape', ()))}")
        if layout not in ("hnd", "nhd"):
            raise invalid(f"xqa_decode: layout: expected 'hnd' or 'nhd', got {layout!r}")
        _, num_q_heads, head_dim = (int(x) for x in q.shape)
        if isinstance(kv_cache, (tuple, list)):
            if len(kv_cache) != 2 or any(len(getattr(t, "shape", ())) != 4 for t in kv_cache):
                raise invalid("xqa_decode: kv_cache: expected the 5-d paged cache or a (k_cache, v_cache) pair of 4-d "
                              "[num_pages, <page>] tensors")
            name, kv_dtype = "k_cache", kv_cache[0].dtype
            pages, a, b, kv_dim = (int(x) for x in kv_cache[0].shape)
            two = 2
        else:
            if len(getattr(kv_cache, "shape", ())) != 5:
                raise invalid(f"xqa_decode: kv_cache: expected a 5-d paged cache or a (k_cache, v_cache) pair, got "
                              f"shape {tuple(getattr(kv_cache, 'shape', ()))}")
            name, kv_dtype = "kv_cache", kv_cache.dtype
            pages, two, a, b, kv_dim = (int(x) for x in kv_cache.shape)
        num_kv_heads, page_size = (a, b) if layout == "hnd" else (b, a)
        if two != 2 or kv_dim != head_dim:
            shape = tuple(kv_cache[0].shape if name == "k_cache" else kv_cache.shape)
            raise invalid(f"xqa_decode: {name}: expected K and V of head_dim {head_dim} (from q), got shape {shape}")
        from .runtime import xqa_problem
        key = xqa_problem(head_dim=head_dim, num_q_heads=num_q_heads, num_kv_heads=num_kv_heads, page_size=page_size,
                          layout=layout, q_dtype=q.dtype, kv_dtype=kv_dtype,
                          out_dtype=q.dtype if out_dtype is None else out_dtype, **fields)
        return cls(key, rt)

    def _full_check(self, sig, q, kv, k_cache, v_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out,
                    lse, max_seq_len, num_splits, config, scales):
        from .torch_ops import _desc
        from .xqa import build_args
        if q.device.type != "cuda":
            raise invalid(f"xqa_decode: q: expected a CUDA tensor for a prepared op, got device {q.device}")
        sd = [_desc(n, v) if isinstance(v, self._tensor) else 1.0
              for n, v in zip(("q_scale", "k_scale", "v_scale", "o_scale"), scales)]
        a, _, _ = build_args(self.info, _desc("q", q), _desc("kv_cache", kv), _desc("block_tables", block_tables),
                             _desc("seq_lens", seq_lens), _desc("q_cu_seq_lens", q_cu_seq_lens), _desc("mask", mask),
                             _desc("sinks", sinks), _desc("out", out), _desc("lse", lse), max_seq_len,
                             self._default_scale, *sd, 0.0, -1, config, num_splits,
                             k_cache=_desc("k_cache", k_cache), v_cache=_desc("v_cache", v_cache))
        entry = (None, tuple(getattr(a, name) for name in self._SHAPE_FIELDS), a._config)
        self._apply(sig, entry)
        _lib.check(self._ensure_device(q.device.index), "ktune_ensure_device")
        self._seen[sig] = entry = (self._op.plan(self._ref)["workspace_bytes"],) + entry[1:]
        return entry

    def _apply(self, sig, entry):
        mine = self._args
        for name, v in zip(self._SHAPE_FIELDS, entry[1]):
            setattr(mine, name, v)
        mine._config = entry[2]
        mine.config = entry[2]
        self._sig = sig

    def __call__(self, q, kv_cache, block_tables, seq_lens, *, max_seq_len: int, out, lse=None, q_cu_seq_lens=None,
                 mask=None, sinks=None, softmax_scale: Optional[float] = None, q_scale=1.0, k_scale=1.0, v_scale=1.0,
                 o_scale=1.0, softcap: float = 0.0, window_left: int = -1, workspace=None, num_splits: int = 0,
                 config: Optional[str] = None):
        if isinstance(kv_cache, (tuple, list)):
            if len(kv_cache) != 2:
                raise invalid(f"xqa_decode: kv_cache: expected a tensor or a (k_cache, v_cache) pair, got a sequence "
                              f"of {len(kv_cache)}")
            kv, (k_cache, v_cache) = None, kv_cache
            cache_sig = tuple(None if t is None else (t.shape, t.dtype, t.device, t.stride()) for t in kv_cache)
        else:
            kv, k_cache, v_cache = kv_cache, None, None
            cache_sig = None if kv is None else (kv.shape, kv.dtype, kv.device, kv.is_contiguous())
        scales = (q_scale, k_scale, v_scale, o_scale)
        tensor = self._tensor
        scale_sig = tuple((s.shape, s.dtype, s.device) if isinstance(s, tensor) else None for s in scales)
        sig = (q.shape, q.dtype, q.device, q.stride(), cache_sig, block_tables.shape, block_tables.dtype,
               block_tables.is_contiguous(), seq_lens.shape, seq_lens.dtype, out.shape, out.dtype, out.device,
               out.stride(), None if lse is None else (lse.shape, lse.dtype, lse.is_contiguous()),
               None if q_cu_seq_lens is None else (q_cu_seq_lens.shape, q_cu_seq_lens.dtype),
               None if mask is None else (mask.shape, mask.dtype), None if sinks is None else (sinks.shape, sinks.dtype),
               block_tables.device, seq_lens.device, max_seq_len, num_splits, config, scale_sig)
        entry = self._seen.get(sig)
        if entry is None:
            entry = self._full_check(sig, q, kv, k_cache, v_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks,
                                     out, lse, max_seq_len, num_splits, config, scales)
        elif sig != self._sig:
            self._apply(sig, entry)
        ws = entry[0]
        index = q.device.index
        if ws:
            if workspace is None:
                import torch
                # from torch's caching allocator on the current stream: inside a CUDA-graph capture it comes from
                # the graph's pool, so replays find it at the same address
                workspace = torch.empty(ws, dtype=torch.uint8, device=q.device)
            elif workspace.numel() * workspace.element_size() < ws or workspace.device != q.device:
                raise invalid(f"xqa_decode: workspace: expected >= {ws} bytes on {q.device}, got "
                              f"{workspace.numel() * workspace.element_size()} bytes on {workspace.device}")
            ws_ptr = workspace.data_ptr()
        else:
            ws_ptr = None
        # q and out are new tensors at every eager step; the rest (the engine's persistent buffers, scales, window)
        # is written only when it changed: a ctypes field write costs several times a comparison.
        a = self._args
        a.q, a.out = q.data_ptr(), out.data_ptr()
        ptr = lambda t: None if t is None else t.data_ptr()  # noqa: E731
        sf = tuple(1.0 if isinstance(s, tensor) else s for s in scales)
        sp = tuple(s.data_ptr() if isinstance(s, tensor) else None for s in scales)
        rest = (ptr(kv), ptr(k_cache), ptr(v_cache), block_tables.data_ptr(), seq_lens.data_ptr(), ptr(q_cu_seq_lens),
                ptr(mask), ptr(sinks), ptr(lse), ws_ptr, ws,
                self._default_scale if softmax_scale is None else softmax_scale) + sf + sp + (softcap, window_left)
        if rest != self._last:
            for name, v, old in zip(self._FIELDS, rest, self._last):
                if v != old:
                    setattr(a, name, v)
            self._last = rest
        status = self._op._run_on_device(self._op._handle, self._ref, self._stream(index), index)
        if status:
            _lib.check(status, "ktune_op_run_on_device")
        return out if lse is None else (out, lse)
