"""PyTorch custom ops of the sparse_mla_decode and mxfp4_gemm families (CUDA tensors only), kept apart from xqa_decode's
so a problem here can never take the xqa ops down: ktune.torch_ops imports this module and, if it fails,
re-raises the error only when one of these ops is called."""

import ctypes
import math
from typing import Optional, Tuple

import torch

from . import _lib
from .errors import invalid, refuse_broadcast, same_device
from .runtime import runtime
from .torch_ops import _OUT, _TAGS, _ensure_device, _scale_arg, _scale_of_op, runtime_caches
# ---- shared helpers for the other families ------------------------------------------------------------------
def _need_t(fam, name, t, shape, tags, what="", strided=False):
    """strided: rows may be strided (the last dimension contiguous), e.g. q sliced out of a wider buffer."""
    if not isinstance(t, torch.Tensor):
        raise invalid(f"{fam}: {name}: expected a torch.Tensor, got {type(t).__name__}")
    tag = _TAGS.get(t.dtype, str(t.dtype).replace("torch.", ""))
    if len(t.shape) != len(shape) or any(w is not None and int(g) != w for g, w in zip(t.shape, shape)):
        want = "[" + ", ".join("*" if w is None else str(w) for w in shape) + "]"
        raise invalid(f"{fam}: {name}: expected shape {want}{what}, got [{', '.join(str(int(x)) for x in t.shape)}]")
    if tag not in tags:
        raise invalid(f"{fam}: {name}: expected dtype {' or '.join(tags)}, got {tag}")
    if strided:
        if t.shape[-1] > 1 and t.stride(-1) != 1:
            raise invalid(f"{fam}: {name}: expected the last dimension contiguous, got strides {tuple(t.stride())}")
        refuse_broadcast(f"{fam}: {name}", t.shape, t.stride())
    elif not t.is_contiguous():
        raise invalid(f"{fam}: {name}: expected a contiguous tensor")
    if t.device.type != "cuda":
        raise invalid(f"{fam}: {name}: expected a CUDA tensor (no CPU-tensor path for this op; CPU data: NumPy arrays "
                      f"run on the host backend), got {t.device}")


def _ptr(t):
    return None if t is None else t.data_ptr()


# ---- sparse_mla_decode --------------------------------------------------------------------------------------
def _mla_launch(q, kv_cache, indices, sinks, out, lse, problem, softmax_scale, num_splits, config):
    from . import mla
    fam = "sparse_mla_decode"
    info = mla.canonical(problem)
    L = _lib.require("ktune_sparse_mla_decode", "ktune_sparse_mla_decode_workspace_bytes",
                     "ktune_sparse_mla_args_default")
    dq = info.kv_lora_rank + info.rope_dim
    if not isinstance(q, torch.Tensor) or q.dim() != 3:
        raise invalid(f"{fam}: q: expected a [num_tokens, {info.num_heads}, {dq}] bf16 tensor")
    T = int(q.shape[0])
    _need_t(fam, "q", q, (T, info.num_heads, dq), ("bf16",), strided=True)
    if kv_cache is None or kv_cache.dim() != 3:
        raise invalid(f"{fam}: kv_cache: expected a 3-d [num_pages, {info.page_size}, row] tensor")
    if info.kv_dtype == "fp8ds":
        _need_t(fam, "kv_cache", kv_cache, (None, info.page_size, info.row_bytes), ("u8",),
                f" (fp8_ds_mla rows of {info.row_bytes} bytes)")
    else:
        _need_t(fam, "kv_cache", kv_cache, (None, info.page_size, dq), ("bf16",))
    _need_t(fam, "indices", indices, (T, info.topk), ("i32",))
    if sinks is not None:
        _need_t(fam, "sinks", sinks, (info.num_heads,), ("f32",))
    _need_t(fam, "out", out, (T, info.num_heads, info.kv_lora_rank), ("bf16",))
    if lse is not None:
        _need_t(fam, "lse", lse, (T, info.num_heads), ("f32",))
    same_device(fam, (("q", q), ("kv_cache", kv_cache), ("indices", indices), ("sinks", sinks), ("out", out),
                      ("lse", lse)))
    softmax_scale = _scale_of_op(fam, softmax_scale, 1.0 / math.sqrt(dq))
    if T == 0:
        return
    rt = runtime()
    _ensure_device(q.device.index)
    a = _lib._MlaArgs()
    L.ktune_sparse_mla_args_default(ctypes.byref(a))
    a.q, a.kv_cache, a.indices, a.sinks, a.out, a.lse = (_ptr(q), _ptr(kv_cache), _ptr(indices), _ptr(sinks),
                                                         _ptr(out), _ptr(lse))
    a.num_tokens, a.num_pages = T, int(kv_cache.shape[0])
    if not q.is_contiguous():  # the library checks the strides (multiples of 8 elements)
        a.q_stride_token, a.q_stride_head = int(q.stride(0)), int(q.stride(1))
    a.softmax_scale = softmax_scale
    cfg = _lib.cstr(config) if config else None
    a.config, a.num_splits = cfg, _lib.c_int("sparse_mla_decode: num_splits", num_splits)
    # The split count (so the workspace) depends on the device's SM count and on the config tuned for the key.
    caches = runtime_caches(rt)
    k = ("mla", q.device.index, info.key, T, config, num_splits)
    stream = torch.cuda.current_stream(q.device).cuda_stream
    for attempt in range(2):
        ws_bytes = caches.workspace.get(k)
        if ws_bytes is None:
            n = ctypes.c_size_t(0)
            _lib.check(L.ktune_sparse_mla_decode_workspace_bytes(rt.handle, info.key.encode(), T, cfg,
                                                                 int(num_splits), ctypes.byref(n)),
                       "ktune_sparse_mla_decode_workspace_bytes")
            ws_bytes = caches.remember_workspace(k, n.value)
        ws = torch.empty(ws_bytes, dtype=torch.uint8, device=q.device) if ws_bytes else None
        a.workspace, a.workspace_bytes = (ws.data_ptr(), ws_bytes) if ws is not None else (None, 0)
        status = L.ktune_sparse_mla_decode(rt.handle, info.key.encode(), ctypes.byref(a), ctypes.c_void_p(stream))
        if status and attempt == 0 and _lib.workspace_refused(status):
            caches.workspace.pop(k, None)  # planned before a config was tuned in this process: size it again
            continue
        _lib.check(status, "ktune_sparse_mla_decode")
        break
    del ws


def _mla_outputs(q, problem, want_lse):
    from . import mla
    info = mla.canonical(problem)
    T = q.shape[0]
    out = torch.empty((T, info.num_heads, info.kv_lora_rank), dtype=torch.bfloat16, device=q.device)
    lse = torch.empty((T, info.num_heads) if want_lse else (0,), dtype=torch.float32, device=q.device)
    return out, lse


@torch.library.custom_op("ktune::sparse_mla_decode", mutates_args=())
def sparse_mla_decode_op(q: torch.Tensor, kv_cache: torch.Tensor, indices: torch.Tensor,
                         sinks: Optional[torch.Tensor], problem: str, softmax_scale: float, want_lse: bool,
                         num_splits: int, config: str) -> Tuple[torch.Tensor, torch.Tensor]:
    out, lse = _mla_outputs(q, problem, want_lse)
    _mla_launch(q, kv_cache, indices, sinks, out, lse if want_lse else None, problem, softmax_scale, num_splits,
                config)
    return out, lse


@sparse_mla_decode_op.register_fake
def _sparse_mla_decode_fake(q, kv_cache, indices, sinks, problem, softmax_scale, want_lse, num_splits, config):
    return _mla_outputs(q, problem, want_lse)


def sparse_mla_decode(problem: str, q, kv_cache, indices, *, sinks=None, softmax_scale: Optional[float] = None,
                      return_lse: bool = False, num_splits: int = 0, config: Optional[str] = None):
    """DeepSeek sparse MLA decode (docs/sparse_mla_decode.md): q [T, heads, rank+rope] bf16 (rows may be strided,
    multiples of 8 elements apart, e.g. a slice of a wider buffer), kv_cache
    [pages, page_size, 656] uint8 (fp8_ds_mla) or [pages, page_size, rank+rope] bf16, indices [T, topk] int32
    (-1 = skip). Returns out [T, heads, rank] bf16, or (out, lse) with return_lse."""
    scale = _scale_arg("sparse_mla_decode", softmax_scale)
    out, lse = torch.ops.ktune.sparse_mla_decode(q, kv_cache, indices, sinks, problem, scale, bool(return_lse),
                                                 num_splits, config or "")
    return (out, lse) if return_lse else out


# ---- mxfp4_gemm ---------------------------------------------------------------------------------------------
def _mxfp4_launch(a, weight_packed, weight_scales, bias, expert_offsets, c, problem, layout_version, config):
    from . import mxfp4
    fam = "mxfp4_gemm"
    info = mxfp4.canonical(problem)
    name = "ktune_mxfp4_grouped_gemm" if info.grouped else "ktune_mxfp4_gemm"
    L = _lib.require(name, "ktune_mxfp4_args_default")
    if not isinstance(a, torch.Tensor) or a.dim() != 2:
        raise invalid(f"{fam}: a: expected a 2-d [m, {info.k}] tensor")
    m = int(a.shape[0])
    if int(a.shape[1]) != info.k:
        raise invalid(f"{fam}: a: expected shape [m, {info.k}], got [{m}, {int(a.shape[1])}]")
    tag = _TAGS.get(a.dtype, str(a.dtype))
    if tag != info.a_dtype:
        raise invalid(f"{fam}: a: expected dtype {info.a_dtype}, got {tag}")
    if a.stride(1) != 1:
        raise invalid(f"{fam}: a: expected unit stride along k (rows may be strided), got strides {tuple(a.stride())}")
    refuse_broadcast(f"{fam}: a", a.shape, a.stride())
    if a.device.type != "cuda":
        raise invalid(f"{fam}: a: expected a CUDA tensor (the host kernel takes NumPy arrays: ktune.mxfp4_gemm with "
                      f"ktune.mxfp4_host.host_weight), got {a.device}")
    wb, sb = mxfp4.packed_bytes(info.n, info.k, info.num_experts)
    _need_t(fam, "weight_packed", weight_packed, (wb,), ("u8",), " (bytes of the prepacked weight)")
    _need_t(fam, "weight_scales", weight_scales, (sb,), ("u8",), " (bytes of the prepacked scales)")
    if bias is not None:
        # The kernels read bias[expert * n + col]: a grouped problem needs a row per expert.
        if info.grouped:
            _need_t(fam, "bias", bias, (info.num_experts, info.n), (info.out_dtype,),
                    " ([num_experts, n] for a grouped problem)")
        else:
            shape = (1, info.n) if isinstance(bias, torch.Tensor) and bias.dim() == 2 else (info.n,)
            _need_t(fam, "bias", bias, shape, (info.out_dtype,), " ([n] or [1, n])")
    if info.grouped:
        if expert_offsets is None:
            raise invalid(f"{fam}: expert_offsets: required for a grouped (MoE) problem ({info.key}): "
                          f"[{info.num_experts + 1}] int32 row offsets per expert on the device")
        _need_t(fam, "expert_offsets", expert_offsets, (info.num_experts + 1,), ("i32",))
    elif expert_offsets is not None:
        raise invalid(f"{fam}: expert_offsets: expected None for a dense problem ({info.key})")
    _need_t(fam, "c", c, (m, info.n), (info.out_dtype,))
    same_device(fam, (("a", a), ("weight_packed", weight_packed), ("weight_scales", weight_scales), ("bias", bias),
                      ("expert_offsets", expert_offsets), ("c", c)))
    if m == 0:
        return
    rt = runtime()
    _ensure_device(a.device.index)
    args = _lib._Mxfp4Args()
    L.ktune_mxfp4_args_default(ctypes.byref(args))
    args.a, args.lda, args.layout_version = a.data_ptr(), int(a.stride(0)), int(layout_version)
    args.weight_packed, args.weight_scales, args.bias = weight_packed.data_ptr(), weight_scales.data_ptr(), _ptr(bias)
    args.c, args.ldc, args.m, args.expert_offsets = c.data_ptr(), info.n, m, _ptr(expert_offsets)
    args.config = _lib.cstr(config) if config else None
    stream = torch.cuda.current_stream(a.device).cuda_stream
    _lib.check(getattr(L, name)(rt.handle, info.key.encode(), ctypes.byref(args), ctypes.c_void_p(stream)), name)


def _mxfp4_output(a, problem):
    from . import mxfp4
    info = mxfp4.canonical(problem)
    return torch.empty((a.shape[0], info.n), dtype=_OUT[info.out_dtype], device=a.device)


@torch.library.custom_op("ktune::mxfp4_gemm", mutates_args=())
def mxfp4_gemm_op(a: torch.Tensor, weight_packed: torch.Tensor, weight_scales: torch.Tensor,
                  bias: Optional[torch.Tensor], expert_offsets: Optional[torch.Tensor], problem: str,
                  layout_version: int, config: str) -> torch.Tensor:
    c = _mxfp4_output(a, problem)
    _mxfp4_launch(a, weight_packed, weight_scales, bias, expert_offsets, c, problem, layout_version, config)
    return c


@mxfp4_gemm_op.register_fake
def _mxfp4_gemm_fake(a, weight_packed, weight_scales, bias, expert_offsets, problem, layout_version, config):
    return _mxfp4_output(a, problem)


@torch.library.custom_op("ktune::mxfp4_gemm_out", mutates_args=("c",))
def mxfp4_gemm_out_op(a: torch.Tensor, weight_packed: torch.Tensor, weight_scales: torch.Tensor,
                      bias: Optional[torch.Tensor], expert_offsets: Optional[torch.Tensor], c: torch.Tensor,
                      problem: str, layout_version: int, config: str) -> None:
    _mxfp4_launch(a, weight_packed, weight_scales, bias, expert_offsets, c, problem, layout_version, config)


@mxfp4_gemm_out_op.register_fake
def _mxfp4_gemm_out_fake(a, weight_packed, weight_scales, bias, expert_offsets, c, problem, layout_version, config):
    return None


def mxfp4_weight(w_packed, w_scale, device="cuda"):
    """Prepacks a canonical MXFP4 weight on the host (w_packed [E, n, k/2] uint8, w_scale [E, n, k/32] uint8 e8m0;
    NumPy arrays or CPU tensors) and uploads it: a ktune.mxfp4.Mxfp4Weight for ktune.mxfp4_gemm. Done once at load."""
    import numpy as np
    from . import mxfp4
    wp = w_packed.cpu().numpy() if isinstance(w_packed, torch.Tensor) else np.asarray(w_packed)
    ws = w_scale.cpu().numpy() if isinstance(w_scale, torch.Tensor) else np.asarray(w_scale)
    pw, ps = mxfp4.prepack(wp, ws)
    e = 1 if wp.ndim == 2 else wp.shape[0]
    n, k = wp.shape[-2], 2 * wp.shape[-1]
    return mxfp4.Mxfp4Weight(n, k, e, torch.from_numpy(pw).to(device), torch.from_numpy(ps).to(device),
                             mxfp4.layout_version())


def mxfp4_gemm(problem: str, a, weight, *, bias=None, expert_offsets=None, out=None, config: Optional[str] = None):
    """C[m, n] = A[m, k] W[n, k]^T (+ bias) with W a prepacked MXFP4 weight (mxfp4_weight). Grouped problems
    (".e<E>.top<K>") take expert_offsets [E + 1] int32 on the device (rows sorted by expert). Returns C, or
    writes out= in place."""
    from . import mxfp4
    # the custom ops see only the packed bytes, so the weight's own shape is compared with the problem here
    mxfp4.check_weight(mxfp4.canonical(problem), weight, "ktune.torch_ops.mxfp4_weight")
    if out is None:
        return torch.ops.ktune.mxfp4_gemm(a, weight.packed, weight.scales, bias, expert_offsets, problem,
                                          weight.layout_version, config or "")
    torch.ops.ktune.mxfp4_gemm_out(a, weight.packed, weight.scales, bias, expert_offsets, out, problem,
                                   weight.layout_version, config or "")
    return out
