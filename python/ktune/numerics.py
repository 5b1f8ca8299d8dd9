"""NumPy helpers for the 8/16-bit formats plain NumPy lacks: bf16 as uint16 bit patterns, FP8 e4m3 as uint8
codes (round to nearest even, as ktune's kernels encode). Needs numpy."""

from __future__ import annotations

import numpy as np


def float_to_bf16(x) -> "np.ndarray":
    """float32 values -> bf16 bit patterns (uint16), round to nearest even; NaN stays NaN."""
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        r[nan] = 0x7FC0
    return r


def bf16_to_float(b) -> "np.ndarray":
    """bf16 bit patterns (uint16) -> float32."""
    u = np.ascontiguousarray(b).astype(np.uint16).astype(np.uint32) << 16
    return u.view(np.float32)


def _e4m3_table():
    codes = np.arange(256, dtype=np.int64)
    s = np.where(codes & 0x80, -1.0, 1.0)
    e = (codes >> 3) & 0xF
    m = codes & 7
    v = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7))
    v = s * v
    v[(codes & 0x7F) == 0x7F] = np.nan  # S.1111.111 is NaN; e4m3fn has no Inf
    return v.astype(np.float32)


E4M3_VALUES = _e4m3_table()  # code -> float32
_POS = E4M3_VALUES[:0x7F].astype(np.float64)  # codes 0..126, increasing


def e4m3_to_float(c) -> "np.ndarray":
    return E4M3_VALUES[np.asarray(c, dtype=np.uint8)]


def float_to_e4m3(x) -> "np.ndarray":
    """float values -> e4m3 codes (uint8): round to nearest even, saturating to +-448; NaN -> 0x7F."""
    f = np.asarray(x, dtype=np.float64)
    a = np.minimum(np.abs(f), 448.0)
    hi = np.clip(np.searchsorted(_POS, a, side="left"), 0, 126)
    lo = np.clip(hi - 1, 0, 126)
    dlo, dhi = a - _POS[lo], _POS[hi] - a
    pick_hi = (dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0))
    code = np.where(pick_hi, hi, lo).astype(np.uint8)
    code = np.where(np.signbit(f) & (code != 0), code | 0x80, code).astype(np.uint8)
    code[np.isnan(f)] = 0x7F
    return code


def to_float(a, dtype: str) -> "np.ndarray":
    """Storage array of a ktune element dtype ("bf16", "fp16", "e4m3"/"fp8", "f32") -> float32 values."""
    if dtype == "bf16":
        a = np.asarray(a)
        return a.astype(np.float32) if a.dtype.name == "bfloat16" else bf16_to_float(a.view(np.uint16))
    if dtype == "fp16":
        return np.asarray(a, dtype=np.float16).astype(np.float32)
    if dtype in ("e4m3", "fp8"):
        a = np.asarray(a)
        return a.astype(np.float32) if a.dtype.name.startswith("float8") else e4m3_to_float(a.view(np.uint8))
    return np.asarray(a, dtype=np.float32)


def from_float(x, dtype: str) -> "np.ndarray":
    """float values -> the storage NumPy uses for a ktune element dtype (uint16 bf16 bits, float16, uint8 e4m3)."""
    if dtype == "bf16":
        return float_to_bf16(x)
    if dtype == "fp16":
        return np.asarray(x, dtype=np.float16)
    if dtype in ("e4m3", "fp8"):
        return float_to_e4m3(x)
    return np.asarray(x, dtype=np.float32)


def storage_dtype(dtype: str):
    return {"bf16": np.uint16, "fp16": np.float16, "e4m3": np.uint8, "fp8": np.uint8, "f32": np.float32}[dtype]
