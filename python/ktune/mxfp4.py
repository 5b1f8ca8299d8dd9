"""mxfp4_gemm (W4A16 GEMM with OCP MXFP4 weights, runtime/include/ktune/mxfp4_gemm.hpp): problem keys, weight
prepacking on the host (NumPy), and the argument checks of the torch ops (ktune.torch_ops)."""

from __future__ import annotations

import ctypes
import re
from dataclasses import dataclass

from . import _lib
from .errors import invalid

_KEY_RE = re.compile(r"^n(\d+)\.k(\d+)(?:\.e(\d+)\.top(\d+))?\.(\w+)-(\w+)$")


@dataclass(frozen=True)
class Mxfp4Info:
    key: str
    n: int
    k: int
    num_experts: int
    top_k: int
    a_dtype: str
    out_dtype: str

    @property
    def grouped(self):
        return self.num_experts > 1


_info = {}


def parse_key(key: str) -> Mxfp4Info:
    hit = _info.get(key)
    if hit is not None:
        return hit
    m = _KEY_RE.match(key) if isinstance(key, str) else None
    if not m:
        raise invalid(f"mxfp4_gemm: problem: expected a canonical key such as 'n8192.k8192.bf16-bf16' or "
                      f"'n5760.k2880.e128.top4.bf16-bf16' (see ktune.mxfp4_problem), got {key!r}")
    info = Mxfp4Info(key, int(m.group(1)), int(m.group(2)), int(m.group(3) or 1), int(m.group(4) or 1), m.group(5),
                     m.group(6))
    _info[key] = info
    return info


def canonical(problem) -> Mxfp4Info:
    from .runtime import problem_key
    if isinstance(problem, str) and problem in _info:
        return _info[problem]
    info = parse_key(problem_key("mxfp4_gemm", problem))
    if isinstance(problem, str):
        _info[problem] = info
    return info


def layout_version() -> int:
    return int(_lib.require("ktune_mxfp4_layout_version").ktune_mxfp4_layout_version())


def _c_dims(n, k, num_experts):
    """(n, k, num_experts) as C ints: a value outside 32 bits is an error naming it, not a wrapped size."""
    return (_lib.c_int("mxfp4_gemm: n", n), _lib.c_int("mxfp4_gemm: k", k),
            _lib.c_int("mxfp4_gemm: num_experts", num_experts))


def packed_bytes(n: int, k: int, num_experts: int = 1):
    """(weight bytes, scale bytes) of a prepacked n x k x num_experts weight."""
    L = _lib.require("ktune_mxfp4_packed_bytes")
    dims = _c_dims(n, k, num_experts)
    out = []
    for which in (0, 1):
        b = ctypes.c_size_t(0)
        _lib.check(L.ktune_mxfp4_packed_bytes(*dims, which, ctypes.byref(b)), "ktune_mxfp4_packed_bytes")
        out.append(b.value)
    return tuple(out)


def _u8(a):
    return a.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))


def _canonical_shapes(w_packed, w_scale):
    import numpy as np
    for name, a in (("w_packed", w_packed), ("w_scale", w_scale)):
        if not isinstance(a, np.ndarray):
            raise invalid(f"mxfp4 prepack: {name}: expected a numpy.ndarray, got {type(a).__name__}")
        if a.dtype != np.uint8:
            raise invalid(f"mxfp4 prepack: {name}: expected dtype uint8, got {a.dtype}")
        if a.ndim not in (2, 3):
            raise invalid(f"mxfp4 prepack: {name}: expected [num_experts, n, ...] or [n, ...], got shape {a.shape}")
    wp = w_packed if w_packed.ndim == 3 else w_packed[None]
    ws = w_scale if w_scale.ndim == 3 else w_scale[None]
    e, n, half_k = wp.shape
    k = 2 * half_k
    if ws.shape != (e, n, k // 32):
        raise invalid(f"mxfp4 prepack: w_scale: expected shape {(e, n, k // 32)} (one e8m0 scale per 32 values of "
                      f"w_packed's {(e, n, half_k)}), got {ws.shape}")
    return np.ascontiguousarray(wp), np.ascontiguousarray(ws), e, n, k


def prepack(w_packed, w_scale):
    """Canonical MXFP4 weight -> the kernel's layout, on the host. w_packed [E, n, k/2] uint8 (two e2m1 codes a
    byte, low nibble = even k), w_scale [E, n, k/32] uint8 e8m0 (2-D arrays: E = 1). Returns (packed_weight,
    packed_scales) as 1-D uint8 arrays; upload them once (ktune.torch_ops.mxfp4_weight does)."""
    import numpy as np
    wp, ws, e, n, k = _canonical_shapes(w_packed, w_scale)
    wb, sb = packed_bytes(n, k, e)
    out_w = np.empty(wb, dtype=np.uint8)
    out_s = np.empty(sb, dtype=np.uint8)
    _lib.check(_lib.require("ktune_mxfp4_prepack_host").ktune_mxfp4_prepack_host(
        _u8(wp), _u8(ws), n, k, e, _u8(out_w), _u8(out_s)), "ktune_mxfp4_prepack_host")
    return out_w, out_s


def unpack(packed_weight, packed_scales, n: int, k: int, num_experts: int = 1):
    """Inverse of prepack: (w_packed [E, n, k/2], w_scale [E, n, k/32])."""
    import numpy as np
    wb, sb = packed_bytes(n, k, num_experts)
    for name, a, want in (("packed_weight", packed_weight, wb), ("packed_scales", packed_scales, sb)):
        if not isinstance(a, np.ndarray) or a.dtype != np.uint8 or a.size != want:
            raise invalid(f"mxfp4 unpack: {name}: expected a uint8 numpy array of {want} bytes, got "
                          f"{getattr(a, 'dtype', type(a).__name__)} of {getattr(a, 'size', '?')}")
    w = np.empty((num_experts, n, k // 2), dtype=np.uint8)
    s = np.empty((num_experts, n, k // 32), dtype=np.uint8)
    _lib.check(_lib.require("ktune_mxfp4_unpack_host").ktune_mxfp4_unpack_host(
        _u8(np.ascontiguousarray(packed_weight)), _u8(np.ascontiguousarray(packed_scales)), *_c_dims(n, k, num_experts),
        _u8(w), _u8(s)), "ktune_mxfp4_unpack_host")
    return w, s


E2M1 = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)


def dequantize(w_packed, w_scale):
    """Canonical MXFP4 -> float32 [E, n, k] (reference for tests): e2m1 code value x 2^(scale - 127); 0xFF = NaN."""
    import numpy as np
    wp = w_packed if w_packed.ndim == 3 else w_packed[None]
    ws = w_scale if w_scale.ndim == 3 else w_scale[None]
    codes = np.stack([wp & 0xF, wp >> 4], axis=-1).reshape(wp.shape[0], wp.shape[1], -1)
    vals = np.asarray(E2M1, dtype=np.float32)[codes]
    exp = np.minimum(ws.astype(np.int32), 254) - 127  # 0xFF (NaN) handled below, never overflows here
    sc = np.where(ws == 0xFF, np.float32(np.nan), np.ldexp(np.float32(1.0), exp).astype(np.float32))
    return vals * np.repeat(sc, 32, axis=-1)


@dataclass
class Mxfp4Weight:
    """A prepacked weight on a device (torch tensors), as the mxfp4 ops take it."""
    n: int
    k: int
    num_experts: int
    packed: object   # uint8 tensor of packed_bytes()[0] bytes
    scales: object   # uint8 tensor of packed_bytes()[1] bytes
    layout_version: int


def check_weight(info: Mxfp4Info, weight, made_by: str) -> None:
    """Refuses a weight that is not an Mxfp4Weight of the problem's n, k and num_experts. The library takes those
    from the problem: a weight of another shape would be read past its end (or, with the same byte count, as the
    wrong matrix). `made_by` names the function that makes a weight for this path."""
    if not isinstance(weight, Mxfp4Weight):
        raise invalid(f"mxfp4_gemm: weight: expected a ktune.mxfp4.Mxfp4Weight ({made_by}), got "
                      f"{type(weight).__name__}")
    shape = (int(weight.n), int(weight.k), int(weight.num_experts))
    if shape != (info.n, info.k, info.num_experts):
        raise invalid(f"mxfp4_gemm: weight: expected n, k, num_experts = {info.n}, {info.k}, {info.num_experts} "
                      f"(the problem's), got {shape[0]}, {shape[1]}, {shape[2]}")
