"""Prepared ops (ktune_op_prepare / ktune_op_run): the problem is validated once, and every call only checks its
tensors, writes their addresses into a cached argument struct and launches on the current torch stream.

  op = ktune.ops.XqaDecodeOp(ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32))
  op(q, kv_cache, block_tables, seq_lens, max_seq_len=4096, out=out)     # eager, graph-capturable

A call reads the shape, strides, dtype and device of every tensor it is given; when they (and the scalars that
shape the plan) equal those of an earlier call, the full argument check is skipped (the C side still checks
every pointer and scalar); anything new goes through the complete check of ktune.xqa.build_args, whose errors
name the argument. The torch custom ops (ktune.torch_ops) run through these
objects. An op refers to its ktune.Runtime, which it keeps alive."""

from __future__ import annotations

import ctypes
import math
import operator
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


def dtype_tags(torch) -> dict:
    """torch dtype -> the storage dtype tag of ktune.xqa's checks, for the dtypes this torch has."""
    tags = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "f32", torch.int32: "i32",
            torch.uint8: "u8", torch.int16: "i16"}
    for name, tag in (("float8_e4m3fn", "e4m3"), ("uint16", "u16"), ("uint32", "u32")):
        if hasattr(torch, name):
            tags[getattr(torch, name)] = tag
    return tags


def tensor_desc(tags: dict, tensor_type, name: str, t):
    """A tensor as ktune.xqa.Desc (None stays None); a non-tensor is an error naming the argument."""
    from .xqa import Desc
    if t is None:
        return None
    if not isinstance(t, tensor_type):
        raise invalid(f"xqa_decode: {name}: expected a torch.Tensor, got {type(t).__name__}")
    d = t.device
    dev = "cpu" if d.type == "cpu" else f"{d.type}:{d.index}"
    return Desc(tuple(t.shape), tags.get(t.dtype, str(t.dtype).replace("torch.", "")), t.is_contiguous(),
                t.data_ptr(), dev, tuple(t.stride()))


def _raw_stream_fn(torch):
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what torch's own extensions read
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


_UNSET = object()  # matches no facts: the next call is checked in full
_SCALES = ("q_scale", "k_scale", "v_scale", "o_scale")
_INT32_MAX = 2**31 - 1
# Facts seen before, kept per op: an eager engine's ragged batches give a new shape at many steps, so the memo
# keeps the most recently used ones only (a fact it forgot is checked in full again).
_SEEN_MAX = 256
_MSL = -4  # where max_seq_len is in a call's facts (see __call__)


def _seq_key(v):
    """max_seq_len as the memo of facts keys it. The plan depends on it only through its power-of-two bucket (the
    library's bucket_pow2_ceil), so a valid value is keyed by that bucket: an engine passing each step's true
    maximum reuses one memo entry per bucket. Anything the full check would refuse is keyed as itself in a tuple,
    which equals no bucket, so it goes to that check."""
    if v.__class__ is not int:
        if v.__class__ is bool:
            return (v,)
        try:
            v = operator.index(v)  # NumPy integers
        except TypeError:
            return (v,)
    if 0 < v <= _INT32_MAX:
        return 1 << (v - 1).bit_length()
    return (v,)


def _tensor_facts(t):
    """What the full check of a strided tensor argument (k_cache, v_cache) depends on: shape, strides, dtype and
    device. The same torch object can change every one of them in place (resize_, as_strided_, set_, the `.data`
    setter, which keeps the object's version counter), so they are read at every call and the object's identity
    proves nothing."""
    return t.shape, t.stride(), t.dtype, t.device


def _dense_facts(t):
    """The same for an argument the check requires C-contiguous: its strides matter only through that."""
    return t.shape, t.is_contiguous(), t.dtype, t.device


class XqaDecodeOp:
    """xqa_decode on torch CUDA tensors (layouts: docs/xqa_decode.md). Arguments as ktune.xqa_decode: kv_cache
    is the combined cache or the pair (k_cache, v_cache), q and out may be strided (head_dim contiguous), a scale
    a number or a one-element float32 tensor on q's device. `out` (and `lse` for problems that write it) are
    required here: allocate them once, as a CUDA graph needs.

    A call reads the facts every argument check depends on (shape, strides -- or only contiguity where the check
    requires a dense tensor --, dtype and device of each tensor, the scalars that shape the plan) and compares
    them with the last call's: equal facts give equal check results, so the call goes straight to writing the
    changed addresses and launching. New facts are looked up among the facts seen before, and checked in full
    (ktune.xqa.build_args, errors naming the argument) when never seen.
    The C side checks every pointer and scalar at every call. One argument struct per object: calls from several
    threads at once need an object each."""

    __slots__ = ("info", "_op", "_args", "_ref", "_seen", "_facts", "_entry", "_ws", "_qp", "_outp", "_rest",
                 "_stream", "_tensor", "_empty", "_u8", "_tags", "_ensure_device", "_default_scale", "__weakref__")

    # struct fields written from a call's persistent arguments (the engine's buffers, scales, window): written
    # only when they changed, since a ctypes field write costs several times a comparison
    _FIELDS = ("kv_cache", "k_cache", "v_cache", "block_tables", "seq_lens", "q_cu_seq_lens", "mask", "sinks", "lse",
               "workspace", "workspace_bytes", "softmax_scale", "softcap", "window_left", "q_scale", "k_scale",
               "v_scale", "o_scale", "q_scale_ptr", "k_scale_ptr", "v_scale_ptr", "o_scale_ptr")
    # what the full check derives from a call's facts (shapes, strides, options); max_seq_len is not among them:
    # the memo holds only its bucket, so each refresh writes the call's own value
    _SHAPE_FIELDS = ("batch", "num_tokens", "q_len_per_req", "max_pages_per_req", "num_pages", "num_splits",
                     "q_stride_token", "q_stride_head", "out_stride_token", "out_stride_head", "kv_page_stride")

    def __init__(self, problem, rt: Optional[Runtime] = None):
        import torch
        from .xqa import canonical
        self._setup(canonical(problem), Op("xqa_decode", canonical(problem).key, rt), torch,
                    _lib.lib().ktune_ensure_device)

    @classmethod
    def _unprepared(cls, problem_key: str, op, torch_module, ensure_device) -> "XqaDecodeOp":
        """For tests and the CPU cost bench only: an op whose C side is `op` (an object with `_handle`,
        `_run_on_device(handle, args_ref, stream, device)` -> status and `plan(args_ref)` -> dict, as Op) and
        `ensure_device(index)` -> status, over the tensor type of `torch_module`; the Python side of a call runs
        unchanged. Needs the library only for the argument struct's defaults."""
        from .xqa import parse_key
        self = cls.__new__(cls)
        self._setup(parse_key(problem_key), op, torch_module, ensure_device)
        return self

    def _setup(self, info, op, torch, ensure_device):
        self.info = info
        self._op = op
        self._args = _lib._XqaArgs()
        _lib.lib().ktune_xqa_args_default(ctypes.byref(self._args))
        self._ref = ctypes.byref(self._args)
        # facts (max_seq_len by its bucket) -> (workspace bytes of its plan, its _SHAPE_FIELDS values, config bytes)
        self._seen = {}
        self._facts = _UNSET  # the facts whose shape fields self._args holds (_UNSET: none proven)
        self._entry = None  # the memo entry whose shape fields self._args holds (None: none proven)
        self._ws = 0  # workspace bytes of their plan
        self._qp = self._outp = None  # the q and out addresses self._args holds
        self._rest = (_UNSET,) * len(self._FIELDS)  # the _FIELDS values self._args holds
        self._stream = _raw_stream_fn(torch)
        self._tensor = torch.Tensor
        self._empty = torch.empty
        self._u8 = torch.uint8
        self._tags = dtype_tags(torch)
        self._ensure_device = ensure_device
        self._default_scale = 1.0 / math.sqrt(info.head_dim)

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

    def _full_check(self, q, kv, k_cache, v_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse,
                    max_seq_len, num_splits, config, scales):
        """Every Python check of ktune.xqa.build_args on this call's tensors, then the plan of its shape. Writes
        the shape fields of self._args; returns the memo entry."""
        from .xqa import build_args
        tags, tensor = self._tags, self._tensor
        desc = lambda name, t: tensor_desc(tags, tensor, name, t)  # noqa: E731
        qd = desc("q", q)
        if qd is None or not qd.device.startswith("cuda:"):
            raise invalid(f"xqa_decode: q: expected a CUDA tensor for a prepared op, got "
                          f"{'None' if qd is None else 'device ' + qd.device}")
        sd = [desc(n, v) if isinstance(v, tensor) else 1.0 for n, v in zip(_SCALES, scales)]
        a, _, _ = build_args(self.info, qd, desc("kv_cache", kv), desc("block_tables", block_tables),
                             desc("seq_lens", seq_lens), desc("q_cu_seq_lens", q_cu_seq_lens), desc("mask", mask),
                             desc("sinks", sinks), desc("out", out), desc("lse", lse), max_seq_len,
                             self._default_scale, *sd, 0.0, -1, config, num_splits,
                             k_cache=desc("k_cache", k_cache), v_cache=desc("v_cache", v_cache))
        entry = (None, tuple(getattr(a, name) for name in self._SHAPE_FIELDS), a._config)
        self._apply(entry)
        self._args.max_seq_len = a.max_seq_len  # the plan reads it
        index = q.device.index
        _lib.check(self._ensure_device(index), "ktune_ensure_device")
        return (self._op.plan(self._ref)["workspace_bytes"],) + entry[1:]

    def _apply(self, entry):
        mine = self._args
        for name, v in zip(self._SHAPE_FIELDS, entry[1]):
            setattr(mine, name, v)
        mine._config = entry[2]  # keeps the bytes alive with the struct
        mine.config = entry[2]

    def _refresh(self, facts, *call):
        """self._args's shape fields (and max_seq_len) for a call whose facts differ from the last call's: from the
        memo when facts of the same plan passed the full check before, else from the full check (raises on bad
        arguments). `facts` is None when they could not be read (an argument that is not a tensor): the full
        check then names it."""
        self._facts = _UNSET  # the shape fields are about to change: nothing is proven until this succeeds
        applied, self._entry = self._entry, None
        seen = self._seen
        try:
            # the memo's key: the facts with max_seq_len's bucket for its value (the last call's facts, compared
            # first in __call__, keep the value: a step with the same one writes nothing)
            key = None if facts is None else facts[:_MSL] + (_seq_key(facts[_MSL]),) + facts[_MSL + 1:]
            entry = None if key is None else seen.get(key)
        except TypeError:  # an unhashable scalar (a list for max_seq_len...): the full check names it
            key = entry = None
        if entry is None:
            entry = self._full_check(*call)
            if key is not None:
                if len(seen) >= _SEEN_MAX:
                    del seen[next(iter(seen))]  # the least recently used
                seen[key] = entry
        else:
            seen[key] = seen.pop(key)  # now the most recently used
            if entry is not applied:  # a step of the same plan (max_seq_len grew) has its fields in place
                self._apply(entry)
            # a positive 32-bit int: only such a value has a bucket for its key
            self._args.max_seq_len = operator.index(facts[_MSL])
        self._ws = entry[0]
        self._entry = entry
        if facts is not None:
            self._facts = facts

    def _scale_parts(self, scales):
        """(facts, values) of the four scales when any is a tensor: a tensor scale's facts are its shape, dtype
        and device, its values 1.0 and its address; a number's facts None, its values itself and no address."""
        tensor = self._tensor
        facts, floats, ptrs = [], [], []
        for s in scales:
            if isinstance(s, tensor):
                facts.append((s.shape, s.dtype, s.device))
                floats.append(1.0)
                ptrs.append(s.data_ptr())
            else:
                facts.append(None)
                floats.append(s)
                ptrs.append(None)
        return tuple(facts), tuple(floats + ptrs)

    def __call__(self, q, kv_cache, block_tables, seq_lens, *, max_seq_len: int, out, lse=None, q_cu_seq_lens=None,
                 mask=None, sinks=None, softmax_scale: Optional[float] = None, q_scale=1.0, k_scale=1.0, v_scale=1.0,
                 o_scale=1.0, softcap: float = 0.0, window_left: int = -1, workspace=None, num_splits: int = 0,
                 config: Optional[str] = None, _replanned: bool = False):
        if isinstance(kv_cache, (tuple, list)):
            if len(kv_cache) != 2:
                raise invalid(f"xqa_decode: kv_cache: expected a tensor or a (k_cache, v_cache) pair, got a sequence "
                              f"of {len(kv_cache)}")
            kv, (k_cache, v_cache) = None, kv_cache
        else:
            kv, k_cache, v_cache = kv_cache, None, None
        tensor = self._tensor
        if isinstance(q_scale, tensor) or isinstance(k_scale, tensor) or isinstance(v_scale, tensor) or \
                isinstance(o_scale, tensor):
            scale_facts, scale_values = self._scale_parts((q_scale, k_scale, v_scale, o_scale))
        else:
            scale_facts, scale_values = None, (q_scale, k_scale, v_scale, o_scale, None, None, None, None)
        try:
            qdev = q.device
            # max_seq_len at _MSL: the memo keys it by its bucket (_refresh)
            facts = (q.shape, q.stride(), q.dtype, qdev, out.shape, out.stride(), out.dtype, out.device,
                     (kv.shape, kv.is_contiguous(), kv.dtype, kv.device) if kv is not None else
                     _tensor_facts(k_cache) + _tensor_facts(v_cache),
                     block_tables.shape, block_tables.is_contiguous(), block_tables.dtype, block_tables.device,
                     seq_lens.shape, seq_lens.is_contiguous(), seq_lens.dtype, seq_lens.device,
                     None if lse is None else _dense_facts(lse),
                     None if q_cu_seq_lens is None else _dense_facts(q_cu_seq_lens),
                     None if mask is None else _dense_facts(mask), None if sinks is None else _dense_facts(sinks),
                     scale_facts, max_seq_len, max_seq_len.__class__, num_splits, config)
        except (AttributeError, TypeError, RuntimeError):
            facts = None  # not all tensors: the full check names the argument
        if facts != self._facts:
            self._refresh(facts, q, kv, k_cache, v_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out,
                          lse, max_seq_len, num_splits, config, (q_scale, k_scale, v_scale, o_scale))
            qdev = q.device
        ws = self._ws
        own_ws = None
        if workspace is not None:
            # A given workspace is passed whatever the memo says: its size is the plan of when these facts were
            # first seen, and the library may plan a split since (a config tuned in this process).
            if not isinstance(workspace, self._tensor):
                raise invalid(f"xqa_decode: workspace: expected a torch.Tensor or None, got {type(workspace).__name__}")
            if workspace.nbytes < ws or workspace.device != qdev or not workspace.is_contiguous():
                raise invalid(f"xqa_decode: workspace: expected a contiguous tensor of >= {ws} bytes on {qdev}, got "
                              f"{workspace.nbytes} bytes on {workspace.device}"
                              f"{'' if workspace.is_contiguous() else ', not contiguous'}")
            ws_ptr, ws = workspace.data_ptr(), workspace.nbytes
        elif ws:
            # from torch's caching allocator on the current stream: inside a CUDA-graph capture it comes from
            # the graph's pool, so replays find it at the same address
            # (held in `own_ws` until the launch is enqueued, so its block is not handed out again before)
            own_ws = self._empty(ws, dtype=self._u8, device=qdev)
            ws_ptr = own_ws.data_ptr()
        else:
            ws_ptr = None
        # q and out are new tensors at every eager step; the rest is written only when it changed
        a = self._args
        p = q.data_ptr()
        if p != self._qp:
            a.q = self._qp = p
        p = out.data_ptr()
        if p != self._outp:
            a.out = self._outp = p
        if kv is not None:
            kv_ptrs = (kv.data_ptr(), None, None)
        else:
            kv_ptrs = (None, k_cache.data_ptr(), v_cache.data_ptr())
        rest = kv_ptrs + (block_tables.data_ptr(), seq_lens.data_ptr(),
                          None if q_cu_seq_lens is None else q_cu_seq_lens.data_ptr(),
                          None if mask is None else mask.data_ptr(), None if sinks is None else sinks.data_ptr(),
                          None if lse is None else lse.data_ptr(), ws_ptr, ws,
                          self._default_scale if softmax_scale is None else softmax_scale, softcap,
                          window_left) + scale_values
        if rest != self._rest:
            self._write(rest)
        index = qdev.index
        op = self._op
        status = op._run_on_device(op._handle, self._ref, self._stream(index), index)
        own_ws = None
        if status:
            if not _replanned and _lib.workspace_refused(status):
                # The workspace memoized for these arguments was planned before the op planned again (a config
                # tuned since, which changes the plans of every fact seen): forget the memo and run the call once
                # more, planned afresh. A given workspace then fits the new plan or is refused naming its size.
                self._seen.clear()
                self._facts = _UNSET
                return self(q, kv_cache, block_tables, seq_lens, max_seq_len=max_seq_len, out=out, lse=lse,
                            q_cu_seq_lens=q_cu_seq_lens, mask=mask, sinks=sinks, softmax_scale=softmax_scale,
                            q_scale=q_scale, k_scale=k_scale, v_scale=v_scale, o_scale=o_scale, softcap=softcap,
                            window_left=window_left, workspace=workspace, num_splits=num_splits, config=config,
                            _replanned=True)
            _lib.check(status, "ktune_op_run_on_device")
        return out if lse is None else (out, lse)

    def _write(self, rest):
        a, old = self._args, self._rest
        self._rest = _UNSET_REST  # a write that fails half way (a scale that is no number) proves nothing
        for name, v, was in zip(self._FIELDS, rest, old):
            if v is not was and v != was:
                if name == "window_left":  # the one C int among them: ctypes would store it wrapped
                    v = _lib.c_int("xqa_decode: window_left", v)
                setattr(a, name, v)
        self._rest = rest


_UNSET_REST = (_UNSET,) * len(XqaDecodeOp._FIELDS)
