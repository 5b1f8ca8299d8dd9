"""PyTorch custom ops (namespace "ktune"), registered when this module is imported (needs torch >= 2.4).

  torch.ops.ktune.xqa_decode(...)      -> (out, lse)   functional: allocates out (and lse, empty unless the
                                                        problem writes LSE); what torch.compile sees
  torch.ops.ktune.xqa_decode_out(...)  -> ()           writes the caller's out (and lse)

Both have fake (meta) implementations, so they trace under torch.compile(fullgraph=True), and launch on the
current torch stream without synchronizing or reading device data, so they can be captured in CUDA graphs
(warm up first: the first call of a kernel loads its module). CPU tensors run on the host backend.
The convenience wrapper is ktune.xqa_decode / ktune.torch_ops.xqa_decode."""

import ctypes
import math
import threading
import weakref
from typing import Optional, Tuple

import torch

from . import _lib
from .errors import invalid
from .ops import dtype_tags, tensor_desc
from .runtime import runtime
from .xqa import build_args, canonical

if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
    raise ImportError(f"ktune.torch_ops needs torch >= 2.4 (torch.library.custom_op); found torch {torch.__version__}")

_TAGS = dtype_tags(torch)
_OUT = {"bf16": torch.bfloat16, "fp16": torch.float16, "e4m3": getattr(torch, "float8_e4m3fn", torch.uint8)}


def _desc(name, t):
    return tensor_desc(_TAGS, torch.Tensor, name, t)


def _scale_of(value, tensor):
    """A scale as the custom ops carry it (a float, and a one-element float32 tensor or None) -> what
    build_args and XqaDecodeOp take: the tensor when given (held on the device, read at every launch)."""
    return value if tensor is None else tensor


def _split_scale(v):
    """A scale as the wrapper takes it (a number or a tensor) -> (float, tensor or None) for the custom ops."""
    return (1.0, v) if isinstance(v, torch.Tensor) else (float(v), None)


def _split_cache(kv_cache):
    """kv_cache as a tensor or the pair (k_cache, v_cache) -> (kv_cache, k_cache, v_cache)."""
    if isinstance(kv_cache, (tuple, list)):
        if len(kv_cache) != 2:
            raise invalid(f"xqa_decode: kv_cache: expected a tensor or a (k_cache, v_cache) pair, got a sequence of "
                          f"{len(kv_cache)}")
        return None, kv_cache[0], kv_cache[1]
    return kv_cache, None, None


# The custom ops' float for "softmax_scale not given" (their schema is a plain float): exactly this value means
# the default; the wrappers never pass it for a given value, since they refuse every non-positive one first.
NO_SOFTMAX_SCALE = -1.0


def _scale_arg(fam, value):
    """A caller's softmax_scale for the custom ops: None -> NO_SOFTMAX_SCALE; otherwise it must be a finite
    value > 0 (the library's rule), so that no given value can be taken for "not given"."""
    if value is None:
        return NO_SOFTMAX_SCALE
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if not (math.isfinite(v) and v > 0):
        raise invalid(f"{fam}: softmax_scale: expected a finite value > 0, got {value!r}")
    return v


def _scale_of_op(fam, value, default):
    """A custom op's softmax_scale -> the one to launch with: the default for exactly NO_SOFTMAX_SCALE; any other
    value must be a finite value > 0 (refused here, before anything reaches the device)."""
    if value == NO_SOFTMAX_SCALE:
        return default
    return _scale_arg(fam, value)


def _ensure_device(index):
    # PyTorch's device = its primary context; after the first call per device the library does one
    # cuCtxGetCurrent (and a cuCtxSetCurrent only when another context is current on this thread)
    _lib.check(_lib.lib().ktune_ensure_device(int(index)), "ktune_ensure_device")


class RuntimeCaches:
    """One thread's per-call caches for one runtime, the default: its prepared XqaDecodeOps by problem key (one op
    per problem and thread: an op writes each call's arguments into its one ctypes struct, and ctypes releases the
    GIL during the launch, so two threads sharing an op could launch each other's arguments) and workspace sizes by
    launch shape (at most WORKSPACE_SIZES; past that the oldest is forgotten and asked of the library again).
    An op holds its runtime, so these never outlive the runtime's place as the default: a thread that finds another
    default runtime starts new caches and empties every thread's caches of other runtimes, so a runtime that
    set_runtime replaced is freed once its caller lets go of it."""

    __slots__ = ("rt", "ops", "workspace", "__weakref__")
    WORKSPACE_SIZES = 256

    def __init__(self, rt):
        self.rt, self.ops, self.workspace = rt, {}, {}

    def remember_workspace(self, k, nbytes):
        sizes = self.workspace
        if len(sizes) >= self.WORKSPACE_SIZES:
            sizes.pop(next(iter(sizes)))  # the oldest (dicts keep insertion order)
        sizes[k] = nbytes
        return nbytes


_local = threading.local()  # .caches: this thread's RuntimeCaches (dropped with the thread)
_all_caches = weakref.WeakSet()  # every thread's, to empty those of a replaced runtime
_all_caches_lock = threading.Lock()


def runtime_caches(rt):
    """This thread's RuntimeCaches of `rt`, the default runtime (one attribute read and compare when unchanged)."""
    c = getattr(_local, "caches", None)
    if c is not None and c.rt is rt:
        return c
    c = _local.caches = RuntimeCaches(rt)
    with _all_caches_lock:
        for other in list(_all_caches):
            if other.rt is not rt:  # a thread mid-call keeps what it holds; its next call starts anew
                other.rt, other.ops, other.workspace = None, {}, {}
        _all_caches.add(c)
    return c


def prepared_op(key):
    """This thread's XqaDecodeOp of `key` on the default runtime, made once per thread and runtime (ktune.ops)."""
    rt = runtime()
    c = getattr(_local, "caches", None)
    if c is None or c.rt is not rt:
        c = runtime_caches(rt)
    op = c.ops.get(key)
    if op is None:
        from .ops import XqaDecodeOp
        op = c.ops[key] = XqaDecodeOp(key, rt)
    return op


def _launch(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse, problem, max_seq_len,
            softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, num_splits, config, k_cache,
            v_cache, q_scale_t, k_scale_t, v_scale_t, o_scale_t):
    info = canonical(problem)
    softmax_scale = _scale_of_op("xqa_decode", softmax_scale, 1.0 / math.sqrt(info.head_dim))
    q_scale, k_scale = _scale_of(q_scale, q_scale_t), _scale_of(k_scale, k_scale_t)
    v_scale, o_scale = _scale_of(v_scale, v_scale_t), _scale_of(o_scale, o_scale_t)
    if isinstance(q, torch.Tensor) and q.device.type == "cuda":
        cache = kv_cache if kv_cache is not None else (k_cache, v_cache)
        prepared_op(info.key)(q, cache, block_tables, seq_lens, max_seq_len=max_seq_len, out=out,
                              lse=lse if info.lse else None, q_cu_seq_lens=q_cu_seq_lens, mask=mask, sinks=sinks,
                              softmax_scale=softmax_scale, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
                              o_scale=o_scale, softcap=softcap, window_left=window_left, num_splits=num_splits,
                              config=config or None)
        return
    rt = runtime()
    sd = lambda name, v: _desc(name, v) if isinstance(v, torch.Tensor) else v  # noqa: E731
    args, batch, _ = build_args(
        info, _desc("q", q), _desc("kv_cache", kv_cache), _desc("block_tables", block_tables),
        _desc("seq_lens", seq_lens), _desc("q_cu_seq_lens", q_cu_seq_lens), _desc("mask", mask),
        _desc("sinks", sinks), _desc("out", out), _desc("lse", lse if info.lse else None), max_seq_len,
        softmax_scale, sd("q_scale", q_scale), sd("k_scale", k_scale), sd("v_scale", v_scale),
        sd("o_scale", o_scale), softcap, window_left, config or None, num_splits,
        k_cache=_desc("k_cache", k_cache), v_cache=_desc("v_cache", v_cache))
    if q.device.type == "cpu":
        from .host import _check_indices
        _check_indices(info, block_tables.numpy(), seq_lens.numpy(),
                       None if q_cu_seq_lens is None else q_cu_seq_lens.numpy(), args.num_pages, q.shape[0],
                       max_seq_len, args.q_len_per_req)
        _lib.check(_lib.lib().ktune_xqa_decode_host(rt.handle, info.key.encode(), ctypes.byref(args), 0),
                   "ktune_xqa_decode_host")
    else:
        raise invalid(f"xqa_decode: q: expected a CUDA or CPU tensor, got device {q.device}")


def _outputs(q, problem):
    info = canonical(problem)
    n = q.shape[0]
    out = torch.empty((n, info.num_q_heads, info.head_dim), dtype=_OUT[info.out_dtype], device=q.device)
    lse = torch.empty((n, info.num_q_heads) if info.lse else (0,), dtype=torch.float32, device=q.device)
    return out, lse


# The cache is kv_cache, or (kv_cache None) the pair k_cache, v_cache; each scale is its float times, when given,
# its one-element float32 tensor (*_scale_t, held on the device).
@torch.library.custom_op("ktune::xqa_decode", mutates_args=())
def xqa_decode_op(q: torch.Tensor, kv_cache: Optional[torch.Tensor], block_tables: torch.Tensor,
                  seq_lens: torch.Tensor, q_cu_seq_lens: Optional[torch.Tensor], mask: Optional[torch.Tensor],
                  sinks: Optional[torch.Tensor], problem: str, max_seq_len: int, softmax_scale: float, q_scale: float,
                  k_scale: float, v_scale: float, o_scale: float, softcap: float, window_left: int, num_splits: int,
                  config: str, k_cache: Optional[torch.Tensor], v_cache: Optional[torch.Tensor],
                  q_scale_t: Optional[torch.Tensor], k_scale_t: Optional[torch.Tensor],
                  v_scale_t: Optional[torch.Tensor], o_scale_t: Optional[torch.Tensor]) -> Tuple[torch.Tensor, torch.Tensor]:
    out, lse = _outputs(q, problem)
    _launch(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse, problem, max_seq_len,
            softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, num_splits, config, k_cache,
            v_cache, q_scale_t, k_scale_t, v_scale_t, o_scale_t)
    return out, lse


@xqa_decode_op.register_fake
def _xqa_decode_fake(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, problem, max_seq_len,
                     softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, num_splits, config,
                     k_cache, v_cache, q_scale_t, k_scale_t, v_scale_t, o_scale_t):
    return _outputs(q, problem)


@torch.library.custom_op("ktune::xqa_decode_out", mutates_args=("out", "lse"))
def xqa_decode_out_op(q: torch.Tensor, kv_cache: Optional[torch.Tensor], block_tables: torch.Tensor,
                      seq_lens: torch.Tensor, q_cu_seq_lens: Optional[torch.Tensor], mask: Optional[torch.Tensor],
                      sinks: Optional[torch.Tensor], out: torch.Tensor, lse: Optional[torch.Tensor], problem: str,
                      max_seq_len: int, softmax_scale: float, q_scale: float, k_scale: float, v_scale: float,
                      o_scale: float, softcap: float, window_left: int, num_splits: int, config: str,
                      k_cache: Optional[torch.Tensor], v_cache: Optional[torch.Tensor],
                      q_scale_t: Optional[torch.Tensor], k_scale_t: Optional[torch.Tensor],
                      v_scale_t: Optional[torch.Tensor], o_scale_t: Optional[torch.Tensor]) -> None:
    _launch(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse, problem, max_seq_len,
            softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, num_splits, config, k_cache,
            v_cache, q_scale_t, k_scale_t, v_scale_t, o_scale_t)


@xqa_decode_out_op.register_fake
def _xqa_decode_out_fake(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse, problem,
                         max_seq_len, softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left,
                         num_splits, config, k_cache, v_cache, q_scale_t, k_scale_t, v_scale_t, o_scale_t):
    return None


def xqa_decode(problem: str, q, kv_cache, block_tables, seq_lens, *, max_seq_len: int, q_cu_seq_lens=None,
               mask=None, sinks=None, softmax_scale: Optional[float] = None, q_scale=1.0, k_scale=1.0, v_scale=1.0,
               o_scale=1.0, softcap: float = 0.0, window_left: int = -1, out=None, lse=None, num_splits: int = 0,
               config: Optional[str] = None):
    """Paged decode attention on torch tensors (layouts: docs/xqa_decode.md). `problem` is a key string from
    ktune.xqa_problem(...) (compute it outside a compiled region). kv_cache is the combined 5-D cache or the pair
    (k_cache, v_cache); q and out may be strided with head_dim contiguous (q a slice of a fused QKV buffer); a
    scale is a number or a float32 tensor of one element on q's device (read by the kernel at every launch, so
    a CUDA graph replays with its current value). `max_seq_len` is a host-known upper bound of seq_lens (no
    device data is read). Returns out, or (out, lse) when the problem writes LSE; with out= given, writes it
    (and lse) in place."""
    scale = _scale_arg("xqa_decode", softmax_scale)
    kv, k_cache, v_cache = _split_cache(kv_cache)
    (qs, qt), (ks, kt), (vs, vt), (os_, ot) = (_split_scale(v) for v in (q_scale, k_scale, v_scale, o_scale))
    if out is None:
        o, l = torch.ops.ktune.xqa_decode(q, kv, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, problem,
                                          max_seq_len, scale, qs, ks, vs, os_, softcap, window_left, num_splits,
                                          config or "", k_cache, v_cache, qt, kt, vt, ot)
    else:
        torch.ops.ktune.xqa_decode_out(q, kv, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse,
                                       problem, max_seq_len, scale, qs, ks, vs, os_, softcap, window_left,
                                       num_splits, config or "", k_cache, v_cache, qt, kt, vt, ot)
        o, l = out, lse
    return (o, l) if ".lse" in problem else o



# ---- the other families (ktune/torch_families.py) ------------------------------------------------------------
try:
    from . import torch_families as _families
    _families_error = None
except Exception as e:  # noqa: BLE001 - reported when one of those ops is called
    _families, _families_error = None, e


def _fam():
    if _families is None:
        raise ImportError(f"ktune.torch_families failed to load: {_families_error!r}") from _families_error
    return _families


def sparse_mla_decode(problem, q, kv_cache, indices, **kwargs):
    """See ktune.torch_families.sparse_mla_decode."""
    return _fam().sparse_mla_decode(problem, q, kv_cache, indices, **kwargs)


def mxfp4_gemm(problem, a, weight, **kwargs):
    """See ktune.torch_families.mxfp4_gemm."""
    return _fam().mxfp4_gemm(problem, a, weight, **kwargs)


def mxfp4_weight(w_packed, w_scale, device="cuda"):
    """See ktune.torch_families.mxfp4_weight."""
    return _fam().mxfp4_weight(w_packed, w_scale, device)
