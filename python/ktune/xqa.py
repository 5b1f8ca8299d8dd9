"""xqa_decode (paged decode attention): problem-key parsing and the argument checks shared by the NumPy (host)
and the PyTorch (GPU) paths. Layouts and semantics: docs/xqa_decode.md; this module never reads tensor data."""

from __future__ import annotations

import ctypes
import math
import operator
import re
from dataclasses import dataclass

from . import _lib
from .errors import invalid, refuse_broadcast

# element dtypes of a problem -> storage dtype tags accepted for them (bit patterns are fine: uint16 for bf16,
# uint8 for e4m3, so plain NumPy can carry them)
ACCEPT = {"bf16": ("bf16", "u16", "i16"), "fp16": ("fp16",), "e4m3": ("e4m3", "u8")}
_KEY_RE = re.compile(r"^d(\d+)\.h(\d+)\.kv(\d+)\.p(\d+)\.(hnd|nhd)\.(\w+)-(\w+)-(\w+)\.q(\d+)\.(none|causal|mask)((?:\.\w+)*)$")


@dataclass(frozen=True)
class XqaInfo:
    key: str
    head_dim: int
    num_q_heads: int
    num_kv_heads: int
    page_size: int
    layout: str
    q_dtype: str
    kv_dtype: str
    out_dtype: str
    max_q_len: int
    mask: str
    sinks: bool
    sliding_window: bool
    softcap: bool
    lse: bool


_info_cache = {}


def parse_key(key: str) -> XqaInfo:
    """Fields of a canonical xqa_decode key (pure Python: usable inside torch fake kernels)."""
    hit = _info_cache.get(key)
    if hit is not None:
        return hit
    m = _KEY_RE.match(key) if isinstance(key, str) else None
    if not m:
        raise invalid(f"xqa_decode: problem: expected a canonical key such as "
                      f"'d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none' (see ktune.xqa_problem), got {key!r}")
    flags = set(x for x in m.group(11).split(".") if x)
    info = XqaInfo(key, int(m.group(1)), int(m.group(2)), int(m.group(3)), int(m.group(4)), m.group(5),
                   m.group(6), m.group(7), m.group(8), int(m.group(9)), m.group(10), "sink" in flags,
                   "win" in flags, "cap" in flags, "lse" in flags)
    _info_cache[key] = info
    return info


def canonical(problem) -> XqaInfo:
    """Accepts a key (canonicalized once through the library) or a dict of problem fields."""
    from .runtime import problem_key
    if isinstance(problem, XqaInfo):
        return problem
    if isinstance(problem, str) and problem in _info_cache:
        return _info_cache[problem]
    key = problem_key("xqa_decode", problem)
    info = parse_key(key)
    if isinstance(problem, str):
        _info_cache[problem] = info
    return info


def mask_words(max_q_len: int) -> int:
    """32-bit words per query row of an explicit draft mask: ceil(max_q_len / 32) (bit j of word w = draft key
    32w + j), 1 up to max_q_len 32 and 2 up to 64."""
    return (int(max_q_len) + 31) // 32


@dataclass
class Desc:
    """What the checks need of an array: shape, storage dtype tag, C-contiguity, data address, device, and its
    strides in elements (None when they are not whole elements)."""
    shape: tuple
    dtype: str
    contiguous: bool
    ptr: int
    device: str = "cpu"
    strides: tuple = None


def _shape_text(s):
    return "[" + ", ".join(str(x) for x in s) + "]"


def _need(name, d, shape, tags, what=""):
    if d is None:
        raise invalid(f"xqa_decode: {name}: expected a {_shape_text(shape)} array, got None")
    if tuple(d.shape) != tuple(shape):
        raise invalid(f"xqa_decode: {name}: expected shape {_shape_text(shape)}{what}, got {_shape_text(d.shape)}")
    if d.dtype not in tags:
        raise invalid(f"xqa_decode: {name}: expected dtype {' or '.join(tags)}, got {d.dtype}")
    if not d.contiguous:
        raise invalid(f"xqa_decode: {name}: expected a C-contiguous array")


def _rows(name, d, shape, tags):
    """q / out: [num_tokens, heads, head_dim] with head_dim contiguous and any token and head strides (a slice
    of a fused QKV buffer). Returns (stride_token, stride_head) in elements, (0, 0) when dense; the library
    checks their values (non-negative, out rows aligned and apart)."""
    if d is None:
        raise invalid(f"xqa_decode: {name}: expected a {_shape_text(shape)} array, got None")
    if tuple(d.shape) != tuple(shape):
        raise invalid(f"xqa_decode: {name}: expected shape {_shape_text(shape)}, got {_shape_text(d.shape)}")
    if d.dtype not in tags:
        raise invalid(f"xqa_decode: {name}: expected dtype {' or '.join(tags)}, got {d.dtype}")
    if d.contiguous:
        return 0, 0
    if d.strides is None or (shape[2] > 1 and d.strides[2] != 1):
        raise invalid(f"xqa_decode: {name}: expected the last dimension (head_dim) contiguous, got strides "
                      f"{d.strides}")
    refuse_broadcast(f"xqa_decode: {name}", shape, d.strides)
    # the stride of a dimension of extent 1 is never used (and may be anything): 0 = the default
    return tuple(int(st) if n > 1 else 0 for n, st in zip(shape[:2], d.strides[:2]))


def _page_shape(info):
    if info.layout == "hnd":
        return (info.num_kv_heads, info.page_size, info.head_dim), "[num_kv_heads, page_size, head_dim] (HND)"
    return (info.page_size, info.num_kv_heads, info.head_dim), "[page_size, num_kv_heads, head_dim] (NHD)"


def _cache(info, kv_cache, k_cache, v_cache):
    """Exactly one of the combined kv_cache [num_pages, 2, page...] or the pair k_cache, v_cache [num_pages,
    page...] whose pages are dense and equally strided. Returns (num_pages, kv, k, v, page stride)."""
    page, page_text = _page_shape(info)
    if kv_cache is not None and (k_cache is not None or v_cache is not None):
        raise invalid("xqa_decode: kv_cache: expected None when the (k_cache, v_cache) pair is given (exactly one "
                      "of kv_cache or the pair)")
    if kv_cache is None and (k_cache is None or v_cache is None):
        missing = "v_cache" if k_cache is not None else "k_cache" if v_cache is not None else "kv_cache"
        raise invalid(f"xqa_decode: {missing}: expected the combined kv_cache or both of k_cache and v_cache, got "
                      f"{'neither' if missing == 'kv_cache' else 'None'}")
    if kv_cache is not None:
        if len(kv_cache.shape) != 5:
            raise invalid(f"xqa_decode: kv_cache: expected a 5-d paged cache, got {_shape_text(kv_cache.shape)}")
        num_pages = int(kv_cache.shape[0])
        _need("kv_cache", kv_cache, (num_pages, 2) + page, ACCEPT[info.kv_dtype],
              f" ([num_pages, 2] + {page_text})")
        return num_pages, kv_cache.ptr, None, None, 0
    if len(k_cache.shape) != 4:
        raise invalid(f"xqa_decode: k_cache: expected a 4-d [num_pages] + {page_text} array, got "
                      f"{_shape_text(k_cache.shape)}")
    num_pages = int(k_cache.shape[0])
    dense = (page[1] * page[2], page[2], 1)
    stride = None
    for name, d in (("k_cache", k_cache), ("v_cache", v_cache)):
        if tuple(d.shape) != (num_pages,) + page:
            raise invalid(f"xqa_decode: {name}: expected shape {_shape_text((num_pages,) + page)} ([num_pages] + "
                          f"{page_text}), got {_shape_text(d.shape)}")
        if d.dtype not in ACCEPT[info.kv_dtype]:
            raise invalid(f"xqa_decode: {name}: expected dtype {' or '.join(ACCEPT[info.kv_dtype])}, got {d.dtype}")
        if d.contiguous:
            s = 0
        elif d.strides is None or any(n > 1 and got != want for n, got, want in zip(page, d.strides[1:], dense)):
            raise invalid(f"xqa_decode: {name}: expected dense pages (strides [*, {', '.join(map(str, dense))}]), got "
                          f"strides {d.strides}")
        else:
            refuse_broadcast(f"xqa_decode: {name}", d.shape, d.strides)
            s = int(d.strides[0]) if num_pages > 1 else 0
        if s == page[0] * page[1] * page[2]:
            s = 0
        if stride is not None and s != stride:
            raise invalid(f"xqa_decode: v_cache: expected the page stride of k_cache ({stride} elements; 0 = "
                          f"dense), got {s}")
        stride = s
    return num_pages, None, k_cache.ptr, v_cache.ptr, stride


def _scale(name, v):
    """A scale as a number, or as an array of one float32 (held on the device: read by the kernel at every
    launch). Returns (float form, pointer or None)."""
    if isinstance(v, Desc):
        if tuple(v.shape) not in ((), (1,)) or v.dtype != "f32":
            raise invalid(f"xqa_decode: {name}: expected a number or a float32 array of one element, got dtype "
                          f"{v.dtype} shape {_shape_text(v.shape)}")
        return 1.0, v.ptr
    return float(v), None


def _as_int(v):
    """v as a Python int when it is an integer of any kind (int, a NumPy integer), else None."""
    try:
        return operator.index(v)
    except TypeError:
        return None


def build_args(info: XqaInfo, q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks, out, lse,
               max_seq_len, softmax_scale, q_scale, k_scale, v_scale, o_scale, softcap, window_left, config,
               num_splits, k_cache=None, v_cache=None):
    """Checks every array against the problem and returns (ctypes args, batch, num_tokens). The cache is kv_cache
    or the pair k_cache, v_cache; q and out may be strided (head_dim contiguous); a scale is a number or a
    one-element float32 array (Desc). Raises InvalidArgumentError naming the argument, the expected value and
    the one given."""
    if q is None or len(q.shape) != 3:
        raise invalid(f"xqa_decode: q: expected a 3-d [num_tokens, {info.num_q_heads}, {info.head_dim}] array, got "
                      f"{'None' if q is None else _shape_text(q.shape)}")
    num_tokens = int(q.shape[0])
    q_strides = _rows("q", q, (num_tokens, info.num_q_heads, info.head_dim), ACCEPT[info.q_dtype])
    if block_tables is None or len(block_tables.shape) != 2:
        raise invalid("xqa_decode: block_tables: expected a 2-d [batch, max_pages_per_req] int32 array, got "
                      f"{'None' if block_tables is None else _shape_text(block_tables.shape)}")
    batch, max_pages = int(block_tables.shape[0]), int(block_tables.shape[1])
    _need("block_tables", block_tables, (batch, max_pages), ("i32",))
    num_pages, kv_ptr, k_ptr, v_ptr, page_stride = _cache(info, kv_cache, k_cache, v_cache)
    _need("seq_lens", seq_lens, (batch,), ("i32",), " ([batch], batch from block_tables)")
    if q_cu_seq_lens is not None:
        _need("q_cu_seq_lens", q_cu_seq_lens, (batch + 1,), ("i32",), " ([batch + 1])")
        q_len_per_req = 1
    else:
        if batch <= 0 or num_tokens % batch != 0:
            raise invalid(f"xqa_decode: q: uniform form needs num_tokens ({num_tokens}) to be exactly batch ({batch})"
                          f" x q_len_per_req; pass q_cu_seq_lens for ragged batches")
        q_len_per_req = num_tokens // batch
    if info.mask == "mask":
        if mask is None:
            raise invalid("xqa_decode: mask: the problem's mask is explicit, so a draft mask is required")
        w = mask_words(info.max_q_len)  # the problem's row stride, the same for every row
        if mask.dtype in ("u16", "i16"):
            if len(mask.shape) == 3 and q_cu_seq_lens is not None:
                # the kernel reads one row per query token; a [batch, 1, 2W] array holds batch rows only
                raise invalid(f"xqa_decode: mask: expected uint16 pairs [num_tokens, {2 * w}] = [{num_tokens}, "
                              f"{2 * w}] in the ragged form (q_cu_seq_lens given; [batch, q_len_per_req, {2 * w}] "
                              f"is the uniform form only), got {_shape_text(mask.shape)}")
            shape = (batch, q_len_per_req, 2 * w) if len(mask.shape) == 3 else (num_tokens, 2 * w)
        else:
            shape = (num_tokens,) if w == 1 else (num_tokens, w)
        u32 = "[num_tokens]" if w == 1 else f"[num_tokens, {w}]"
        _need("mask", mask, shape, ("u16", "i16", "u32", "i32"),
              f" ({w} 32-bit word{'s' if w > 1 else ''} per query row for max_q_len {info.max_q_len}: uint32 {u32} "
              f"or uint16 pairs [num_tokens, {2 * w}], uniform form also [batch, q_len_per_req, {2 * w}])")
    elif mask is not None:
        raise invalid(f"xqa_decode: mask: expected None (the problem's mask is {info.mask}), got an array")
    if info.sinks:
        _need("sinks", sinks, (info.num_q_heads,), ("f32",), " ([num_q_heads] float32)")
    elif sinks is not None:
        raise invalid("xqa_decode: sinks: expected None (the problem has no sinks), got an array")
    out_strides = _rows("out", out, (num_tokens, info.num_q_heads, info.head_dim), ACCEPT[info.out_dtype])
    if info.lse:
        _need("lse", lse, (num_tokens, info.num_q_heads), ("f32",))
    elif lse is not None:
        raise invalid("xqa_decode: lse: expected None (the problem does not write LSE), got an array")
    bound = None if isinstance(max_seq_len, bool) else _as_int(max_seq_len)  # NumPy integers too
    if bound is None or bound <= 0:
        raise invalid(f"xqa_decode: max_seq_len: expected a positive int (a host-known upper bound of seq_lens), "
                      f"got {max_seq_len!r}")
    max_seq_len = bound
    if softmax_scale is None:
        softmax_scale = 1.0 / math.sqrt(info.head_dim)
    scales = [_scale(n, v) for n, v in (("q_scale", q_scale), ("k_scale", k_scale), ("v_scale", v_scale),
                                        ("o_scale", o_scale))]
    devices = {d.device for d in (q, kv_cache, k_cache, v_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks,
                                  out, lse, q_scale, k_scale, v_scale, o_scale) if isinstance(d, Desc)}
    if len(devices) > 1:
        raise invalid(f"xqa_decode: every array must live on one device, got {', '.join(sorted(devices))}")
    a = _lib._XqaArgs()
    _lib.lib().ktune_xqa_args_default(ctypes.byref(a))
    a.q, a.kv_cache, a.block_tables, a.seq_lens = q.ptr, kv_ptr, block_tables.ptr, seq_lens.ptr
    a.k_cache, a.v_cache, a.kv_page_stride = k_ptr, v_ptr, page_stride
    a.q_stride_token, a.q_stride_head = q_strides
    a.out_stride_token, a.out_stride_head = out_strides
    a.q_cu_seq_lens = q_cu_seq_lens.ptr if q_cu_seq_lens is not None else None
    a.mask = mask.ptr if mask is not None else None
    a.sinks = sinks.ptr if sinks is not None else None
    a.out = out.ptr
    a.lse = lse.ptr if lse is not None else None
    a.batch, a.num_tokens, a.q_len_per_req = batch, num_tokens, q_len_per_req
    a.max_pages_per_req, a.num_pages = max_pages, num_pages
    a.max_seq_len = _lib.c_int("xqa_decode: max_seq_len", max_seq_len)
    a.softmax_scale = float(softmax_scale)
    (a.q_scale, a.q_scale_ptr), (a.k_scale, a.k_scale_ptr), (a.v_scale, a.v_scale_ptr), (a.o_scale, a.o_scale_ptr) = scales
    a.softcap, a.window_left = float(softcap), _lib.c_int("xqa_decode: window_left", window_left)
    a._config = _lib.cstr(config) if config else None  # keeps the bytes alive with the struct
    a.config = a._config
    a.num_splits = _lib.c_int("xqa_decode: num_splits", num_splits)
    return a, batch, num_tokens
