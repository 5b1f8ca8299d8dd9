"""ctypes binding of the ktune C API (runtime/include/ktune/ktune.h) and discovery of libktune.so.

Search order for the library (the first that loads wins; docs/python.md):
  1. $KTUNE_LIBRARY: a path to the library (taken as given), or a directory holding it
  2. ktune/lib/ inside this package (a wheel may bundle the library there)
  3. $KTUNE_PREFIX/lib and $KTUNE_PREFIX/lib64 (a `cmake --install` prefix)
  4. a source checkout's build trees, when the package runs from python/ of the checkout:
     <checkout>/build/lib, then <checkout>/build-*/lib (newest first)
  5. sys.prefix/lib, /usr/local/lib, /usr/lib/x86_64-linux-gnu, /usr/lib
  6. the dynamic loader's own path (LD_LIBRARY_PATH, ld.so.cache)
In a directory only the SONAME (ktune/_soname.py: the ABI this binding is written for) is looked for: a plain
libktune.so link may lead to another minor version, whose structs may differ.
"""

from __future__ import annotations

import ctypes
import glob
import os
import sys
import threading

from ._soname import SONAME
from .errors import KtuneError, error_for_status

_NAMES = (SONAME,)


class Owned:
    """An object owning a library handle: close() releases it once (also when garbage-collected)."""

    _handle = None

    def _release(self, handle):
        raise NotImplementedError

    def close(self):
        handle = getattr(self, "_handle", None)
        if handle is not None:
            self._handle = None
            self._release(handle)

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


class _XqaArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by the *_args_default of the library (header of every args struct)
        ("family_id", ctypes.c_uint32),
        ("q", ctypes.c_void_p),
        ("kv_cache", ctypes.c_void_p),
        ("block_tables", ctypes.c_void_p),
        ("seq_lens", ctypes.c_void_p),
        ("q_cu_seq_lens", ctypes.c_void_p),
        ("mask", ctypes.c_void_p),
        ("sinks", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("batch", ctypes.c_int),
        ("num_tokens", ctypes.c_int),
        ("q_len_per_req", ctypes.c_int),
        ("max_pages_per_req", ctypes.c_int),
        ("num_pages", ctypes.c_int64),
        ("max_seq_len", ctypes.c_int),
        ("softmax_scale", ctypes.c_float),
        ("q_scale", ctypes.c_float),
        ("k_scale", ctypes.c_float),
        ("v_scale", ctypes.c_float),
        ("o_scale", ctypes.c_float),
        ("softcap", ctypes.c_float),
        ("window_left", ctypes.c_int),
        ("config", ctypes.c_char_p),
        ("num_splits", ctypes.c_int),
        ("q_stride_token", ctypes.c_int64),  # elements; 0: dense
        ("q_stride_head", ctypes.c_int64),
        ("out_stride_token", ctypes.c_int64),
        ("out_stride_head", ctypes.c_int64),
        ("k_cache", ctypes.c_void_p),  # the (k_cache, v_cache) pair instead of kv_cache
        ("v_cache", ctypes.c_void_p),
        ("kv_page_stride", ctypes.c_int64),
        ("q_scale_ptr", ctypes.c_void_p),  # device-held fp32 scales or None
        ("k_scale_ptr", ctypes.c_void_p),
        ("v_scale_ptr", ctypes.c_void_p),
        ("o_scale_ptr", ctypes.c_void_p),
    ]


class _RuntimeOptions(ctypes.Structure):
    _fields_ = [("cache_path", ctypes.c_char_p), ("read_only", ctypes.c_int), ("allow_jit", ctypes.c_int)]


class _Stats(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int64) for n in ("memory_hits", "cache_hits", "misses", "compiles",
                                              "compile_failures", "loads", "damaged_skipped", "tuning_misses")] + [
        ("compile_ms", ctypes.c_double), ("load_ms", ctypes.c_double)]


class _WarmupOptions(ctypes.Structure):
    _fields_ = [
        ("preset", ctypes.c_char_p),
        ("arches", ctypes.c_char_p),
        ("kv_dtype", ctypes.c_char_p),
        ("max_batch", ctypes.c_int),
        ("max_seq_len", ctypes.c_int),
        ("spec_tokens", ctypes.c_int),
        ("all_candidates", ctypes.c_int),
        ("budget_s", ctypes.c_double),
        ("jobs", ctypes.c_int),
        ("device", ctypes.c_int),
        ("progress", ctypes.c_void_p),  # a PROGRESS_FN (kept as a plain pointer so None is NULL)
        ("progress_user", ctypes.c_void_p),
    ]


class _WarmupRequest(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by ktune_warmup_request_default
        ("family_id", ctypes.c_uint32),
        ("options", ctypes.POINTER(_WarmupOptions)),
        ("devices", ctypes.c_char_p),
        ("host_workers", ctypes.c_int),
        ("retune", ctypes.c_int),
    ]


PROGRESS_FN = ctypes.CFUNCTYPE(None, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_void_p)


class _WarmupResult(ctypes.Structure):
    _fields_ = [(n, ctypes.c_int) for n in ("keys", "tuned", "already_done", "skipped", "failed", "compile_jobs",
                                            "compiled", "cache_hits", "compile_failed")] + [
        ("compile_wall_ms", ctypes.c_double), ("tune_ms", ctypes.c_double), ("wall_ms", ctypes.c_double),
        ("budget_exhausted", ctypes.c_int), ("items_json", ctypes.c_char_p)]


def _candidates():
    env = os.environ.get("KTUNE_LIBRARY")
    if env:
        if os.path.isdir(env):
            for n in _NAMES:
                yield os.path.join(env, n)
        else:
            yield env
        return  # an explicit choice is never second-guessed
    here = os.path.dirname(os.path.abspath(__file__))
    for n in _NAMES:
        yield os.path.join(here, "lib", n)
    prefix = os.environ.get("KTUNE_PREFIX")
    if prefix:
        for d in ("lib", "lib64"):
            for n in _NAMES:
                yield os.path.join(prefix, d, n)
    checkout = os.path.dirname(os.path.dirname(here))  # python/ktune -> the checkout
    if os.path.isfile(os.path.join(checkout, "runtime", "include", "ktune", "ktune.h")):
        trees = [os.path.join(checkout, "build")]
        others = sorted(glob.glob(os.path.join(checkout, "build-*")), key=os.path.getmtime, reverse=True)
        for d in trees + others:
            for n in _NAMES:
                yield os.path.join(d, "lib", n)
    for d in (os.path.join(sys.prefix, "lib"), "/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib"):
        for n in _NAMES:
            yield os.path.join(d, n)
    yield SONAME  # the loader's path


_lock = threading.Lock()
_lib = None
_lib_path = None


class _MlaArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by the *_args_default of the library (header of every args struct)
        ("family_id", ctypes.c_uint32),
        ("q", ctypes.c_void_p),
        ("kv_cache", ctypes.c_void_p),
        ("indices", ctypes.c_void_p),
        ("sinks", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("lse", ctypes.c_void_p),
        ("workspace", ctypes.c_void_p),
        ("workspace_bytes", ctypes.c_size_t),
        ("num_tokens", ctypes.c_int),
        ("num_pages", ctypes.c_int64),
        ("softmax_scale", ctypes.c_float),
        ("config", ctypes.c_char_p),
        ("num_splits", ctypes.c_int),
        ("q_stride_token", ctypes.c_int64),  # elements; 0: dense
        ("q_stride_head", ctypes.c_int64),
    ]


class _Mxfp4Args(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by the *_args_default of the library (header of every args struct)
        ("family_id", ctypes.c_uint32),
        ("a", ctypes.c_void_p),
        ("lda", ctypes.c_int),
        ("layout_version", ctypes.c_int),
        ("weight_packed", ctypes.c_void_p),
        ("weight_scales", ctypes.c_void_p),
        ("bias", ctypes.c_void_p),
        ("c", ctypes.c_void_p),
        ("ldc", ctypes.c_int),
        ("m", ctypes.c_int),
        ("expert_offsets", ctypes.c_void_p),
        ("config", ctypes.c_char_p),
    ]


class _XqaMaskArgs(ctypes.Structure):
    _fields_ = [
        ("struct_size", ctypes.c_uint32),  # set by ktune_xqa_mask_args_default
        ("family_id", ctypes.c_uint32),
        ("bool_mask", ctypes.c_void_p),
        ("q_cu_seq_lens", ctypes.c_void_p),
        ("out", ctypes.c_void_p),
        ("source", ctypes.c_int),
        ("batch", ctypes.c_int),
        ("q_len", ctypes.c_int),
        ("rows", ctypes.c_int),
    ]


def _optional_signatures():
    """Entry points of families that a library may lack (older builds): missing ones make only their ops fail."""
    c = ctypes
    P = c.c_void_p
    S = c.c_int
    U8 = c.POINTER(c.c_uint8)
    return {
        "ktune_sparse_mla_args_init": ([c.POINTER(_MlaArgs), c.c_size_t], S),
        "ktune_sparse_mla_decode_workspace_bytes": ([P, c.c_char_p, S, c.c_char_p, S, c.POINTER(c.c_size_t)], S),
        "ktune_sparse_mla_decode_plan": ([P, c.c_char_p, S, c.c_char_p, S, c.POINTER(c.c_char_p)], S),
        "ktune_sparse_mla_decode": ([P, c.c_char_p, c.POINTER(_MlaArgs), P], S),
        "ktune_sparse_mla_decode_host": ([P, c.c_char_p, c.POINTER(_MlaArgs), S], S),
        "ktune_sparse_mla_decode_host_plan": ([P, c.c_char_p, S, c.c_char_p, S, S, c.POINTER(c.c_char_p)], S),
        "ktune_mxfp4_args_init": ([c.POINTER(_Mxfp4Args), c.c_size_t], S),
        "ktune_mxfp4_layout_version": ([], S),
        "ktune_mxfp4_packed_bytes": ([S, S, S, S, c.POINTER(c.c_size_t)], S),
        "ktune_mxfp4_prepack_host": ([U8, U8, S, S, S, U8, U8], S),
        "ktune_mxfp4_unpack_host": ([U8, U8, S, S, S, U8, U8], S),
        "ktune_mxfp4_gemm": ([P, c.c_char_p, c.POINTER(_Mxfp4Args), P], S),
        "ktune_mxfp4_grouped_gemm": ([P, c.c_char_p, c.POINTER(_Mxfp4Args), P], S),
        "ktune_mxfp4_gemm_host": ([P, c.c_char_p, c.POINTER(_Mxfp4Args), S], S),
        "ktune_mxfp4_grouped_gemm_host": ([P, c.c_char_p, c.POINTER(_Mxfp4Args), S], S),
        # the xqa_decode engine helpers (ktune.engine)
        "ktune_xqa_mask_args_init": ([c.POINTER(_XqaMaskArgs), c.c_size_t], S),
        "ktune_xqa_mask_words": ([P, c.POINTER(S)], S),
        "ktune_xqa_pack_mask": ([P, c.POINTER(_XqaMaskArgs), P], S),
        "ktune_xqa_q_cu_seq_lens": ([P, P, S, P, P], S),
    }


def require(*names):
    """Raises UnsupportedError when this libktune lacks one of the named entry points."""
    L = lib()
    missing = [n for n in names if not hasattr(L, n)]
    if missing:
        raise error_for_status(9, f"ktune: {library_path()} lacks {', '.join(missing)} (built before this family "
                                  f"was added: rebuild libktune)", "unsupported")
    return L


def _declare(lib):
    c = ctypes
    P = c.c_void_p
    S = c.c_int
    sig = {
        "ktune_last_error": ([], c.c_char_p),
        "ktune_version": ([], c.c_char_p),
        "ktune_status_name": ([S], c.c_char_p),
        "ktune_runtime_options_default": ([c.POINTER(_RuntimeOptions)], None),
        "ktune_runtime_create": ([c.POINTER(_RuntimeOptions), c.POINTER(P)], S),
        "ktune_runtime_destroy": ([P], None),
        "ktune_runtime_stats": ([P, c.POINTER(_Stats)], S),
        "ktune_compile": ([P, c.c_char_p, c.c_char_p, c.c_char_p, c.c_char_p, c.POINTER(c.c_int)], S),
        "ktune_xqa_args_init": ([c.POINTER(_XqaArgs), c.c_size_t], S),
        "ktune_xqa_decode_workspace_bytes": ([P, c.c_char_p, S, S, c.POINTER(c.c_size_t)], S),
        "ktune_xqa_decode": ([P, c.c_char_p, c.POINTER(_XqaArgs), P], S),
        "ktune_use_device": ([S], S),
        # the language-bindings section of ktune.h
        "ktune_problem_key": ([c.c_char_p, c.c_char_p, c.POINTER(c.c_char_p)], S),
        "ktune_family_names": ([c.POINTER(c.c_char_p)], S),
        "ktune_preset_names": ([c.POINTER(c.c_char_p)], S),
        "ktune_ensure_device": ([S], S),
        "ktune_xqa_decode_workspace_bytes_ex": ([P, c.c_char_p, S, S, c.c_char_p, S, c.POINTER(c.c_size_t)], S),
        "ktune_xqa_decode_host": ([P, c.c_char_p, c.POINTER(_XqaArgs), S], S),
        "ktune_xqa_decode_plan": ([P, c.c_char_p, S, S, c.c_char_p, S, S, S, c.POINTER(c.c_char_p)], S),
        "ktune_op_prepare": ([P, c.c_char_p, c.c_char_p, c.POINTER(P)], S),
        "ktune_op_run": ([P, P, P], S),
        "ktune_op_run_on_device": ([P, P, P, S], S),
        "ktune_op_plan": ([P, P, c.POINTER(c.c_char_p)], S),
        "ktune_op_set_pdl": ([P, S], S),
        "ktune_op_free": ([P], None),
        "ktune_warmup_options_default": ([c.POINTER(_WarmupOptions)], None),
        "ktune_warmup": ([P, c.POINTER(_WarmupOptions), c.POINTER(_WarmupResult)], S),
        "ktune_warmup_workers": ([P, c.POINTER(_WarmupOptions), c.c_char_p, c.c_int, c.POINTER(_WarmupResult)], S),
        "ktune_warmup_request_init": ([c.POINTER(_WarmupRequest), c.c_size_t], S),
        "ktune_warmup_run": ([P, c.POINTER(_WarmupRequest), c.POINTER(_WarmupResult)], S),
    }
    for name, (args, res) in _optional_signatures().items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            continue
        f.argtypes = args
        f.restype = res
    missing = []
    for name, (args, res) in sig.items():
        try:
            f = getattr(lib, name)
        except AttributeError:
            missing.append(name)
            continue
        f.argtypes = args
        f.restype = res
    _define_struct_defaults(lib)
    return missing


def _define_struct_defaults(lib):
    """What ktune.h's *_default(s) macros are in C, *_init(s, sizeof *s), as callables of the same names on the
    loaded library: lib.ktune_xqa_args_default(ctypes.byref(a)) fills `a` at its ctypes size (the library
    refuses and never writes past a size it does not take)."""
    structs = {"ktune_xqa_args": _XqaArgs, "ktune_sparse_mla_args": _MlaArgs, "ktune_mxfp4_args": _Mxfp4Args,
               "ktune_xqa_mask_args": _XqaMaskArgs, "ktune_warmup_request": _WarmupRequest}
    for name, cls in structs.items():
        init = getattr(lib, name + "_init", None)
        if init is None:  # a family this library lacks: its calls are missing too (require() names them)
            continue

        def fill(ref, _init=init, _size=ctypes.sizeof(cls), _name=name + "_init"):
            check(_init(ref, _size), _name)

        setattr(lib, name + "_default", fill)


def lib():
    """The loaded libktune (ctypes.CDLL), loading it on first use. Raises KtuneError naming every path tried."""
    global _lib, _lib_path
    if _lib is not None:
        return _lib
    with _lock:
        if _lib is not None:
            return _lib
        tried = []
        for path in _candidates():
            if os.path.sep in path and not os.path.exists(path):
                tried.append(path + " (absent)")
                continue
            try:
                handle = ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                tried.append(f"{path} ({e})")
                continue
            missing = _declare(handle)
            if missing:
                tried.append(f"{path} (too old: lacks {', '.join(missing)})")
                continue
            _lib, _lib_path = handle, path
            return _lib
        raise error_for_status(
            2, "ktune: libktune.so not found; set KTUNE_LIBRARY to its path (or its directory). Tried: "
            + "; ".join(tried))


def library_path():
    """Where libktune was loaded from."""
    lib()
    return _lib_path


def last_error():
    return (lib().ktune_last_error() or b"").decode("utf-8", "replace")


def c_int(what, v):
    """v as the value of a C int field: outside 32 bits it is an error naming the field (ctypes would store it
    wrapped, e.g. 2**32 + 16 as 16)."""
    v = int(v)
    if not -(1 << 31) <= v < (1 << 31):
        from .errors import invalid
        raise invalid(f"{what}: expected a 32-bit int, got {v}")
    return v


def workspace_refused(status):
    """True when a call failed for its workspace: the library planned again since the caller sized it (a config
    tuned since in this process, another device's SM count) and needs more. Nothing was launched."""
    from .errors import INVALID_ARGUMENT
    return status == INVALID_ARGUMENT and "workspace" in (last_error() or "")


def check(status, what=""):
    """Raises the KtuneError subclass for a failed C status, carrying ktune_last_error()."""
    if status == 0:
        return
    msg = last_error() or f"{what}: failed"
    name = (lib().ktune_status_name(status) or b"?").decode()
    raise error_for_status(status, msg, name)


def cstr(s):
    return None if s is None else s.encode("utf-8")
