"""What an engine writes around xqa_decode, as ktune calls (docs/engines.md): the draft-mask words packed on the
GPU, q_cu_seq_lens built on the GPU, mask buffers at stable addresses, and a decode plan per CUDA-graph batch bucket
that owns every buffer a captured decode reads or writes.

  op = ktune.ops.XqaDecodeOp(key)                              # key: an explicit-mask problem for the masks
  words = ktune.xqa_pack_mask(bool_mask, op)                    # [rows, q_len] bool -> int32 [rows, W]
  cu = ktune.q_cu_seq_lens(q_lens, op)                          # int32 [batch] -> int32 [batch + 1]
  masks = ktune.MaskCache(op, max_batch=64); masks.get(4)       # the same tensor on every get
  plan = ktune.DecodePlan(op, batch=64, max_seq_len=8192, max_pages_per_req=256)
  plan.plan(seq_lens, block_tables, q_lens=q_lens, mask=bool_mask)   # every step, eager (device copies)
  out = plan.run(q, kv_cache)                                   # captured once in a CUDA graph, replayed

The kernels are entry points of the op's xqa_decode module, so a warmed-up cache serves them with no compile. torch
CUDA tensors run on the current stream (no sync, no allocation when `out` is given); NumPy arrays (and torch CPU
tensors) run the host forms, which also reject bad lengths (errors name the entry)."""

from __future__ import annotations

import ctypes
import threading
from typing import Optional

from . import _lib
from .errors import invalid, refuse_readonly, same_device

# DraftMaskSource of ktune/xqa_helpers.hpp
_SOURCES = {"bool": 0, "causal": 1, "full": 2}
_KEYED_OPS = {}
_KEYED_LOCK = threading.Lock()


def mask_words(max_q_len: int) -> int:
    """W: 32-bit mask words a query row, ceil(max_q_len / 32)."""
    return (int(max_q_len) + 31) // 32


def _xqa_op(op):
    """(ops.Op handle, XqaInfo) of an XqaDecodeOp, an xqa_decode ops.Op, or a problem (key or fields)."""
    from .ops import Op, XqaDecodeOp
    from .xqa import canonical, parse_key
    if isinstance(op, XqaDecodeOp):
        return op._op, op.info
    if isinstance(op, Op):
        if op.family != "xqa_decode":
            raise invalid(f"xqa_decode: op: expected a prepared xqa_decode op, got one of {op.family}")
        return op, parse_key(op.key)
    if isinstance(op, (str, dict)):
        from .runtime import runtime as default_runtime
        info = canonical(op)
        rt = default_runtime()
        with _KEYED_LOCK:  # a plain C op: no torch needed for the NumPy forms
            # One op per key on the default runtime: after set_runtime (or its runtime's close) the helpers follow
            # the default runtime instead of calling an op that belongs to another, or to none. An op holds its
            # runtime, so a new one drops the ops of every other runtime (a replaced runtime is freed once its
            # caller lets go of it).
            cached = _KEYED_OPS.get(info.key)
            if cached is None or cached.runtime is not rt or cached._handle is None:
                for k in [k for k, o in _KEYED_OPS.items() if o.runtime is not rt]:
                    del _KEYED_OPS[k]
                cached = _KEYED_OPS[info.key] = Op("xqa_decode", info.key, rt)
        return cached, info
    raise invalid(f"xqa_decode: op: expected an XqaDecodeOp, an xqa_decode ops.Op or a problem key, got "
                  f"{type(op).__name__}")


def _is_torch(x):
    return type(x).__module__.startswith("torch")


def _on_cuda(x):
    return _is_torch(x) and x.device.type == "cuda"


def _host_call(fn):
    """Runs fn() on a thread whose ktune device is the host CPU (host pointers, synchronous), returning its status."""
    box = {}

    def work():
        L = _lib.lib()
        status = L.ktune_use_device(-1)
        box["status"] = status if status else fn()
        box["error"] = _lib.last_error() if box["status"] else ""
    t = threading.Thread(target=work)
    t.start()
    t.join()
    return box["status"], box["error"]


def _check_host(status, error, what):
    if status:
        from .errors import error_for_status
        name = (_lib.lib().ktune_status_name(status) or b"?").decode()
        raise error_for_status(status, error or f"{what}: failed", name)


def _stream(index):
    import torch
    from .ops import _raw_stream_fn
    return _raw_stream_fn(torch)(index)


def _ptr(x):
    if x is None:
        return None
    return x.data_ptr() if _is_torch(x) else x.ctypes.data


def _need_int32_vector(name, x, length=None):
    dt = str(x.dtype)
    if not dt.endswith("int32") or len(x.shape) != 1 or (length is not None and x.shape[0] != length):
        want = f"[{length}]" if length is not None else "a 1-d"
        raise invalid(f"xqa_decode: {name}: expected {want} int32 array, got {dt} of shape {tuple(x.shape)}")
    if not (x.is_contiguous() if _is_torch(x) else x.flags["C_CONTIGUOUS"]):
        raise invalid(f"xqa_decode: {name}: expected a contiguous array")


def _empty_words(like, rows, words):
    if _is_torch(like):
        import torch
        return torch.empty((rows, words), dtype=torch.int32, device=like.device)
    import numpy as np
    return np.empty((rows, words), dtype=np.uint32)


def xqa_pack_mask(bool_mask, op, *, q_cu_seq_lens=None, out=None, source: str = "bool", q_len: Optional[int] = None,
                  batch: Optional[int] = None):
    """Packs a boolean draft/tree mask into the XQA words of `op`'s problem (mask explicit): returns `out`, int32
    [rows, W] for torch (uint32 for NumPy), W = ceil(max_q_len / 32); word w of a row has bit j set when draft key
    32w + j is visible (docs/xqa_decode.md).

    bool_mask: bool or uint8 [rows, q_len] (or [batch, q_len, q_len] in the uniform form). Uniform form (no
    q_cu_seq_lens): every request has q_len query tokens and rows = batch * q_len. Ragged form: q_cu_seq_lens int32
    [batch + 1] on the mask's device; request b owns rows q_cu_seq_lens[b] .. q_cu_seq_lens[b + 1] and its rows have
    bits only for keys below its length (rows past the last request are left as they are in `out`).
    source "causal" / "full" writes the causal (key j visible to query i iff j <= i) / all-visible pattern instead
    of reading a mask: pass bool_mask=None with q_len, and batch for the uniform form."""
    handle, info = _xqa_op(op)
    if source not in _SOURCES:
        raise invalid(f"xqa_decode: source: expected 'bool', 'causal' or 'full', got {source!r}")
    words = mask_words(info.max_q_len)
    like = bool_mask if bool_mask is not None else (q_cu_seq_lens if q_cu_seq_lens is not None else out)
    if source == "bool":
        if bool_mask is None:
            raise invalid("xqa_decode: bool_mask: expected a [rows, q_len] bool/uint8 array (source 'bool'), got None")
        shape = tuple(bool_mask.shape)
        if len(shape) == 3 and q_cu_seq_lens is None and shape[1] == shape[2]:
            shape = (shape[0] * shape[1], shape[2])
        if len(shape) != 2 or str(bool_mask.dtype).split(".")[-1] not in ("bool", "uint8", "bool_"):
            raise invalid(f"xqa_decode: bool_mask: expected a bool or uint8 [rows, q_len] array, got "
                          f"{str(bool_mask.dtype)} of shape {tuple(bool_mask.shape)}")
        if not (bool_mask.is_contiguous() if _is_torch(bool_mask) else bool_mask.flags["C_CONTIGUOUS"]):
            raise invalid("xqa_decode: bool_mask: expected a contiguous array")
        rows, q_len = shape
    else:
        if bool_mask is not None:
            raise invalid(f"xqa_decode: bool_mask: expected None (source {source!r}), got an array")
        if q_len is None:
            raise invalid(f"xqa_decode: q_len: expected the query tokens per row (source {source!r}), got None")
        rows = None
    if q_cu_seq_lens is not None:
        _need_int32_vector("q_cu_seq_lens", q_cu_seq_lens)
        n_req = q_cu_seq_lens.shape[0] - 1
        if batch is not None and batch != n_req:
            raise invalid(f"xqa_decode: batch: expected len(q_cu_seq_lens) - 1 = {n_req}, got {batch}")
        batch = n_req
        if rows is None:
            rows = out.shape[0] if out is not None else batch * info.max_q_len
    else:
        if rows is not None:
            if q_len < 1 or rows % q_len:
                raise invalid(f"xqa_decode: bool_mask: uniform form needs rows ({rows}) a multiple of q_len ({q_len})")
            batch = rows // q_len
        elif batch is None:
            raise invalid(f"xqa_decode: batch: expected the number of requests (uniform source {source!r}), got None")
        else:
            rows = batch * q_len
    if like is None:
        raise invalid(f"xqa_decode: out: expected an output array (source {source!r} with nothing to take the "
                      f"device from), got None")
    if out is None:
        out = _empty_words(like, rows, words)
    else:
        want = (rows, words)
        if tuple(out.shape) != want or not str(out.dtype).endswith("int32"):
            raise invalid(f"xqa_decode: out: expected an int32/uint32 array of shape {list(want)}, got "
                          f"{out.dtype} of shape {tuple(out.shape)}")
        if not (out.is_contiguous() if _is_torch(out) else out.flags["C_CONTIGUOUS"]):
            raise invalid("xqa_decode: out: expected a contiguous array (the words are written densely)")
        refuse_readonly("xqa_decode: out", out)
    same_device("xqa_decode", (("out", out), ("bool_mask", bool_mask), ("q_cu_seq_lens", q_cu_seq_lens)))
    L = _lib.require("ktune_xqa_pack_mask")
    a = _lib._XqaMaskArgs()
    L.ktune_xqa_mask_args_default(ctypes.byref(a))
    a.bool_mask, a.q_cu_seq_lens, a.out = _ptr(bool_mask), _ptr(q_cu_seq_lens), _ptr(out)
    a.source, a.batch = _SOURCES[source], _lib.c_int("xqa_decode: batch", batch)
    a.q_len, a.rows = _lib.c_int("xqa_decode: q_len", q_len), _lib.c_int("xqa_decode: rows", rows)
    if _on_cuda(out):
        index = out.device.index
        _lib.check(L.ktune_ensure_device(index), "ktune_ensure_device")
        _lib.check(L.ktune_xqa_pack_mask(handle._handle, ctypes.byref(a), _stream(index)), "ktune_xqa_pack_mask")
    else:
        _check_host(*_host_call(lambda: L.ktune_xqa_pack_mask(handle._handle, ctypes.byref(a), None)),
                    "ktune_xqa_pack_mask")
    return out


def q_cu_seq_lens(q_lens, op, *, out=None):
    """The ragged form's q_cu_seq_lens int32 [batch + 1] (0, then the running sum) from per-request query lengths
    q_lens int32 [batch], each in [0, max_q_len] of `op`'s problem: one launch on the current stream for torch CUDA
    tensors, the host form (which rejects bad lengths) for NumPy."""
    handle, info = _xqa_op(op)
    _need_int32_vector("q_lens", q_lens)
    batch = q_lens.shape[0]
    if out is None:
        if _is_torch(q_lens):
            import torch
            out = torch.empty(batch + 1, dtype=torch.int32, device=q_lens.device)
        else:
            import numpy as np
            out = np.empty(batch + 1, dtype=np.int32)
    else:
        _need_int32_vector("out", out, batch + 1)
        refuse_readonly("xqa_decode: out", out)
    same_device("xqa_decode", (("q_lens", q_lens), ("out", out)))
    L = _lib.require("ktune_xqa_q_cu_seq_lens")
    args = (handle._handle, _ptr(q_lens), _lib.c_int("xqa_decode: batch", batch), _ptr(out))
    if _on_cuda(out):
        index = out.device.index
        _lib.check(L.ktune_ensure_device(index), "ktune_ensure_device")
        _lib.check(L.ktune_xqa_q_cu_seq_lens(*args, _stream(index)), "ktune_xqa_q_cu_seq_lens")
    else:
        _check_host(*_host_call(lambda: L.ktune_xqa_q_cu_seq_lens(*args, None)), "ktune_xqa_q_cu_seq_lens")
    return out


def _decode_mask(words):
    """The mask argument of today's xqa_decode call: [rows] int32 when W is 1, else [rows, W]. A view: same address."""
    return words.view(-1) if words.shape[1] == 1 else words


class MaskCache:
    """Draft-mask words at stable device addresses for CUDA graphs: get(q_len, causal) returns the same int32
    [max_batch * q_len, W] tensor on every call for one (q_len, causal), built on the GPU on its first get (on the
    current stream; make the first get of each key before capturing). causal=True: key j visible to query i iff
    j <= i; causal=False: every draft key visible. The uniform form of any batch <= max_batch reads its first
    batch * q_len rows (mask_for)."""

    def __init__(self, op, max_batch: int, device=None):
        import torch
        self._op = op
        _, self.info = _xqa_op(op)
        if self.info.mask != "mask":
            raise invalid(f"xqa_decode: mask: expected an op of a problem with mask explicit, got {self.info.mask}")
        if int(max_batch) < 1 or int(max_batch) > 65535:
            raise invalid(f"xqa_decode: max_batch: expected 1..65535, got {max_batch}")
        self.max_batch = int(max_batch)
        self.device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        self._buffers = {}

    def get(self, q_len: int, causal: bool = True):
        key = (int(q_len), bool(causal))
        buf = self._buffers.get(key)
        if buf is None:
            import torch
            if not 1 <= key[0] <= self.info.max_q_len:
                raise invalid(f"xqa_decode: q_len: expected 1..{self.info.max_q_len} (problem max_q_len), got {q_len}")
            buf = torch.empty((self.max_batch * key[0], mask_words(self.info.max_q_len)), dtype=torch.int32,
                              device=self.device)
            xqa_pack_mask(None, self._op, out=buf, source="causal" if causal else "full", q_len=key[0],
                          batch=self.max_batch)
            self._buffers[key] = buf
        return buf

    def mask_for(self, batch: int, q_len: int, causal: bool = True):
        """The mask argument of a uniform decode of `batch` requests: a view of get(q_len, causal) (same address)."""
        if not 1 <= int(batch) <= self.max_batch:
            raise invalid(f"xqa_decode: batch: expected 1..{self.max_batch} (the cache's max_batch), got {batch}")
        return _decode_mask(self.get(q_len, causal)[: int(batch) * int(q_len)])


class DecodePlan:
    """One CUDA-graph batch bucket of an xqa_decode op: every buffer a captured decode reads or writes, allocated
    once at a fixed address -- workspace, out (and lse when the problem writes it), block_tables, seq_lens, q_lens,
    q_cu_seq_lens and the mask words.

    q_len given: the uniform form (every request has q_len query tokens; q holds batch * q_len rows). q_len None:
    the ragged form (per-request q_lens at plan(); q holds batch * max_q_len rows, the tokens first).
    plan(...) is eager, every step: it copies the step's metadata into the buffers on the current stream (device to
    device, no host sync), pads to the bucket with zero-length requests and packs the step's mask. run(q, kv_cache)
    launches through the op with those buffers: capture it once in a CUDA graph (after one eager run) and replay."""

    def __init__(self, op, batch: int, max_seq_len: int, max_pages_per_req: int, *, q_len: Optional[int] = None,
                 device=None):
        import torch
        from .ops import XqaDecodeOp
        if isinstance(op, XqaDecodeOp):
            self.op = op
        else:  # on the runtime of the op given (its cache and JIT policy); a key's op is on the default runtime
            handle, info = _xqa_op(op)
            self.op = XqaDecodeOp(info.key, handle.runtime)
        info = self.info = self.op.info
        if not 1 <= int(batch) <= 65535:
            raise invalid(f"xqa_decode: batch: expected 1..65535, got {batch}")
        if q_len is not None and not 1 <= int(q_len) <= info.max_q_len:
            raise invalid(f"xqa_decode: q_len: expected 1..{info.max_q_len} (problem max_q_len) or None (ragged), "
                          f"got {q_len}")
        if int(max_pages_per_req) * info.page_size < int(max_seq_len) or int(max_seq_len) < 1:
            raise invalid(f"xqa_decode: max_pages_per_req: expected max_pages_per_req * page_size "
                          f"({max_pages_per_req} * {info.page_size}) >= max_seq_len ({max_seq_len}) >= 1")
        self.batch, self.max_seq_len, self.max_pages_per_req = int(batch), int(max_seq_len), int(max_pages_per_req)
        self.q_len = None if q_len is None else int(q_len)
        self.device = torch.device(device) if device is not None else torch.device("cuda", torch.cuda.current_device())
        self.num_tokens = self.batch * (self.q_len if self.q_len is not None else info.max_q_len)
        dev, i32 = self.device, torch.int32
        out_dtype = {"bf16": torch.bfloat16, "fp16": torch.float16,
                     "e4m3": getattr(torch, "float8_e4m3fn", torch.uint8)}[info.out_dtype]
        self.out = torch.empty((self.num_tokens, info.num_q_heads, info.head_dim), dtype=out_dtype, device=dev)
        self.lse = torch.empty((self.num_tokens, info.num_q_heads), dtype=torch.float32, device=dev) if info.lse else None
        self.block_tables = torch.zeros((self.batch, self.max_pages_per_req), dtype=i32, device=dev)
        self.seq_lens = torch.zeros(self.batch, dtype=i32, device=dev)
        self.q_lens = torch.zeros(self.batch, dtype=i32, device=dev)
        self.q_cu_seq_lens = torch.zeros(self.batch + 1, dtype=i32, device=dev)
        self.mask = (torch.zeros((self.num_tokens, mask_words(info.max_q_len)), dtype=i32, device=dev)
                     if info.mask == "mask" else None)
        a = _lib._XqaArgs()
        L = _lib.lib()
        L.ktune_xqa_args_default(ctypes.byref(a))
        a.batch, a.max_seq_len = self.batch, self.max_seq_len
        _lib.check(L.ktune_ensure_device(dev.index), "ktune_ensure_device")
        self.workspace_bytes = int(self.op._op.plan(ctypes.byref(a))["workspace_bytes"])
        self.workspace = torch.empty(max(self.workspace_bytes, 16), dtype=torch.uint8, device=dev)

    def plan(self, seq_lens, block_tables, *, q_lens=None, mask=None, causal: bool = False) -> None:
        """The step's metadata into the plan's buffers (current stream, no sync): seq_lens int32 [n] and
        block_tables int32 [n, <= max_pages_per_req] of the n <= batch live requests (the rest become zero-length
        padding); ragged plans take q_lens int32 [n]. Explicit-mask problems take the step's bool mask ([rows,
        q_len] as xqa_pack_mask: uniform rows = n * q_len, ragged rows = the live tokens) or causal=True."""
        n = int(seq_lens.shape[0])
        if not 1 <= n <= self.batch:
            raise invalid(f"xqa_decode: seq_lens: expected 1..{self.batch} requests (the plan's batch), got {n}")
        if tuple(block_tables.shape[:1]) != (n,) or len(block_tables.shape) != 2 or \
                block_tables.shape[1] > self.max_pages_per_req:
            raise invalid(f"xqa_decode: block_tables: expected [{n}, <= {self.max_pages_per_req}], got "
                          f"{tuple(block_tables.shape)}")
        self.seq_lens[:n].copy_(seq_lens, non_blocking=True)
        self.seq_lens[n:].zero_()
        self.block_tables[:n, : block_tables.shape[1]].copy_(block_tables, non_blocking=True)
        if self.q_len is None:
            if q_lens is None or tuple(q_lens.shape) != (n,):
                raise invalid(f"xqa_decode: q_lens: expected int32 [{n}] (a ragged plan), got "
                              f"{None if q_lens is None else tuple(q_lens.shape)}")
            self.q_lens[:n].copy_(q_lens, non_blocking=True)
            self.q_lens[n:].zero_()
            q_cu_seq_lens(self.q_lens, self.op, out=self.q_cu_seq_lens)
        elif q_lens is not None:
            raise invalid(f"xqa_decode: q_lens: expected None (a uniform plan of q_len {self.q_len}), got an array")
        if self.mask is None:
            if mask is not None or causal:
                raise invalid(f"xqa_decode: mask: expected None (the problem's mask is {self.info.mask})")
            return
        if (mask is None) == (not causal):
            raise invalid("xqa_decode: mask: expected either the step's bool mask or causal=True (explicit problem)")
        cu = self.q_cu_seq_lens if self.q_len is None else None
        if causal:
            q_len = self.q_len if self.q_len is not None else self.info.max_q_len
            xqa_pack_mask(None, self.op, q_cu_seq_lens=cu, out=self.mask if cu is not None else
                          self.mask[: self.batch * q_len], source="causal", q_len=q_len, batch=self.batch)
        elif cu is not None:
            rows = int(mask.shape[0])
            xqa_pack_mask(mask, self.op, q_cu_seq_lens=cu, out=self.mask[:rows])
        else:
            if tuple(mask.shape) not in ((n * self.q_len, self.q_len), (n, self.q_len, self.q_len)):
                raise invalid(f"xqa_decode: mask: expected a bool [{n * self.q_len}, {self.q_len}] mask (uniform plan "
                              f"of q_len {self.q_len}, {n} requests), got shape {tuple(mask.shape)}")
            xqa_pack_mask(mask, self.op, out=self.mask[: n * self.q_len])

    def run(self, q, kv_cache, *, sinks=None, softmax_scale: Optional[float] = None, q_scale=1.0, k_scale=1.0,
            v_scale=1.0, o_scale=1.0, softcap: float = 0.0, window_left: int = -1):
        """The decode over the plan's buffers: q [num_tokens, num_q_heads, head_dim] (num_tokens = batch * q_len,
        or batch * max_q_len for a ragged plan; strided or not), kv_cache the combined cache or the (k_cache,
        v_cache) pair, each scale a number or a float32[1] device tensor (read at every launch, so a captured
        graph replays with its current value). Returns the plan's out (and lse)."""
        rows = int(q.shape[0])  # views of the plan's buffers: the same addresses on every call
        mask = None if self.mask is None else _decode_mask(self.mask[:rows])
        return self.op(q, kv_cache, self.block_tables, self.seq_lens, max_seq_len=self.max_seq_len,
                       out=self.out[:rows], lse=None if self.lse is None else self.lse[:rows],
                       q_cu_seq_lens=self.q_cu_seq_lens if self.q_len is None else None, mask=mask,
                       sinks=sinks, softmax_scale=softmax_scale, q_scale=q_scale, k_scale=k_scale, v_scale=v_scale,
                       o_scale=o_scale, softcap=softcap, window_left=window_left,
                       workspace=self.workspace if self.workspace_bytes else None)
