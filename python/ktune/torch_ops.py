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
from typing import Optional, Tuple

import torch

from . import _lib
from .errors import invalid
from .runtime import runtime
from .xqa import Desc, build_args, canonical

if not hasattr(torch, "library") or not hasattr(torch.library, "custom_op"):
    raise ImportError(f"ktune.torch_ops needs torch >= 2.4 (torch.library.custom_op); found torch {torch.__version__}")

_TAGS = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "f32", torch.int32: "i32", torch.uint8: "u8",
         torch.int16: "i16"}
for _name, _tag in (("float8_e4m3fn", "e4m3"), ("uint16", "u16"), ("uint32", "u32")):
    if hasattr(torch, _name):
        _TAGS[getattr(torch, _name)] = _tag
_OUT = {"bf16": torch.bfloat16, "fp16": torch.float16, "e4m3": getattr(torch, "float8_e4m3fn", torch.uint8)}


def _desc(name, t):
    if t is None:
        return None
    if not isinstance(t, torch.Tensor):
        raise invalid(f"xqa_decode: {name}: expected a torch.Tensor, got {type(t).__name__}")
    dev = "cpu" if t.device.type == "cpu" else f"{t.device.type}:{t.device.index}"
    return Desc(tuple(t.shape), _TAGS.get(t.dtype, str(t.dtype).replace("torch.", "")), t.is_contiguous(),
                t.data_ptr(), dev)


_ws_cache = {}


def _ensure_device(index):
    # PyTorch's device = its primary context; after the first call per device the library does one
    # cuCtxGetCurrent (and a cuCtxSetCurrent only when another context is current on this thread)
    _lib.check(_lib.lib().ktune_ensure_device(int(index)), "ktune_ensure_device")


_ops = {}


def prepared_op(key):
    """The XqaDecodeOp of `key` on the default runtime, made once (ktune.ops)."""
    rt = runtime()
    k = (id(rt), key)
    op = _ops.get(k)
    if op is None or op._op.runtime is not rt:
        from .ops import XqaDecodeOp
        op = _ops[k] = XqaDecodeOp(key, rt)
    return op


def _launch(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse, problem, max_seq_len,
            softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, num_splits, config):
    info = canonical(problem)
    if softmax_scale is None or softmax_scale < 0:
        softmax_scale = 1.0 / math.sqrt(info.head_dim)
    if isinstance(q, torch.Tensor) and q.device.type == "cuda":
        prepared_op(info.key)(q, kv_cache, block_tables, seq_lens, max_seq_len=max_seq_len, out=out,
                              lse=lse if info.lse else None, q_cu_seq_lens=q_cu_seq_lens, mask=mask, sinks=sinks,
                              softmax_scale=softmax_scale, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
                              o_scale=o_scale, softcap=softcap, window_left=window_left, num_splits=num_splits,
                              config=config or None)
        return
    rt = runtime()
    args, batch, _ = build_args(
        info, _desc("q", q), _desc("kv_cache", kv_cache), _desc("block_tables", block_tables),
        _desc("seq_lens", seq_lens), _desc("q_cu_seq_lens", q_cu_seq_lens), _desc("mask", mask),
        _desc("sinks", sinks), _desc("out", out), _desc("lse", lse if info.lse else None), max_seq_len,
        softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, config or None, num_splits)
    if q.device.type == "cpu":
        from .host import _check_indices
        _check_indices(info, block_tables.numpy(), seq_lens.numpy(),
                       None if q_cu_seq_lens is None else q_cu_seq_lens.numpy(), kv_cache.shape[0], q.shape[0],
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


@torch.library.custom_op("ktune::xqa_decode", mutates_args=())
def xqa_decode_op(q: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                  q_cu_seq_lens: Optional[torch.Tensor], mask: Optional[torch.Tensor], sinks: Optional[torch.Tensor],
                  problem: str, max_seq_len: int, softmax_scale: float, q_scale: float, k_scale: float,
                  v_scale: float, o_scale: float, softcap: float, window_left: int, num_splits: int,
                  config: str) -> Tuple[torch.Tensor, torch.Tensor]:
    out, lse = _outputs(q, problem)
    _launch(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse, problem, max_seq_len,
            softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, num_splits, config)
    return out, lse


@xqa_decode_op.register_fake
def _xqa_decode_fake(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, problem, max_seq_len,
                     softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, num_splits, config):
    return _outputs(q, problem)


@torch.library.custom_op("ktune::xqa_decode_out", mutates_args=("out", "lse"))
def xqa_decode_out_op(q: torch.Tensor, kv_cache: torch.Tensor, block_tables: torch.Tensor, seq_lens: torch.Tensor,
                      q_cu_seq_lens: Optional[torch.Tensor], mask: Optional[torch.Tensor],
                      sinks: Optional[torch.Tensor], out: torch.Tensor, lse: Optional[torch.Tensor], problem: str,
                      max_seq_len: int, softmax_scale: float, q_scale: float, k_scale: float, v_scale: float,
                      o_scale: float, softcap: float, window_left: int, num_splits: int, config: str) -> None:
    _launch(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse, problem, max_seq_len,
            softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, num_splits, config)


@xqa_decode_out_op.register_fake
def _xqa_decode_out_fake(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse, problem,
                         max_seq_len, softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left,
                         num_splits, config):
    return None


def xqa_decode(problem: str, q, kv_cache, block_tables, seq_lens, *, max_seq_len: int, q_cu_seq_lens=None,
               mask=None, sinks=None, softmax_scale: Optional[float] = None, q_scale: float = 1.0,
               k_scale: float = 1.0, v_scale: float = 1.0, o_scale: float = 1.0, softcap: float = 0.0,
               window_left: int = -1, out=None, lse=None, num_splits: int = 0, config: Optional[str] = None):
    """Paged decode attention on torch tensors (layouts: docs/xqa_decode.md). `problem` is a key string from
    ktune.xqa_problem(...) (compute it outside a compiled region). `max_seq_len` is a host-known upper bound of
    seq_lens (no device data is read). Returns out, or (out, lse) when the problem writes LSE; with out= given,
    writes it (and lse) in place."""
    scale = -1.0 if softmax_scale is None else float(softmax_scale)
    if out is None:
        o, l = torch.ops.ktune.xqa_decode(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, problem,
                                          max_seq_len, scale, q_scale, k_scale, v_scale, o_scale, softcap,
                                          window_left, num_splits, config or "")
    else:
        torch.ops.ktune.xqa_decode_out(q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse,
                                       problem, max_seq_len, scale, q_scale, k_scale, v_scale, o_scale, softcap,
                                       window_left, num_splits, config or "")
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
