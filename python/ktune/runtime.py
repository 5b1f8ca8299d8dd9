"""Runtimes, problem keys, presets and warmup over the C API."""

from __future__ import annotations

import ctypes
import json
import sys
import threading
import weakref
import time
from dataclasses import dataclass, field
from typing import Callable, List, Optional, Sequence, Union

from . import _lib
from .errors import KtuneError, error_for_status, invalid


def version() -> str:
    return _lib.lib().ktune_version().decode()


class Runtime(_lib.Owned):
    """A ktune runtime: cache layers, module table and JIT policy (ktune_runtime_create).

    cache: search path of cache databases (like $KTUNE_CACHE); None: $KTUNE_CACHE, else
        $XDG_CACHE_HOME/ktune/ktune.db (~/.cache/ktune/ktune.db when XDG_CACHE_HOME is unset).
    read_only / allow_jit: None takes the environment's ($KTUNE_CACHE_READONLY, $KTUNE_JIT)."""

    def __init__(self, cache: Optional[str] = None, read_only: Optional[bool] = None,
                 allow_jit: Optional[bool] = None):
        L = _lib.lib()
        opts = _lib._RuntimeOptions()
        L.ktune_runtime_options_default(ctypes.byref(opts))
        self._cache = cache.encode() if cache is not None else opts.cache_path  # kept alive with the struct
        opts.cache_path = self._cache
        if read_only is not None:
            opts.read_only = int(bool(read_only))
        if allow_jit is not None:
            opts.allow_jit = int(bool(allow_jit))
        handle = ctypes.c_void_p()
        _lib.check(L.ktune_runtime_create(ctypes.byref(opts), ctypes.byref(handle)), "ktune_runtime_create")
        self._handle = handle
        self._ops = weakref.WeakSet()  # prepared ops (ktune.ops) on this runtime: freed before it is destroyed
        self.read_only = bool(opts.read_only)
        self.allow_jit = bool(opts.allow_jit)
        self.cache_path = self._cache.decode() if self._cache else None

    @property
    def handle(self):
        if self._handle is None:
            raise error_for_status(1, "ktune.Runtime: used after close()")
        return self._handle

    def _release(self, handle):
        for op in list(getattr(self, "_ops", ())):
            op.close()  # an op of a destroyed runtime then fails its call by name instead of using freed memory
        _lib.lib().ktune_runtime_destroy(handle)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def stats(self) -> dict:
        s = _lib._Stats()
        _lib.check(_lib.lib().ktune_runtime_stats(self.handle, ctypes.byref(s)), "ktune_runtime_stats")
        return {name: getattr(s, name) for name, _ in _lib._Stats._fields_}

    def compile(self, family: str, problem: str, arch: str, config: Optional[str] = None) -> bool:
        """Compiles (or finds in the cache) one config of `problem` for `arch` ("sm_90a", "host"), and the problem's
        shared module where the family has one (its split-KV combine and helpers); True if anything compiled.
        A binary the cache did not take (a read-only runtime, a failed write) raises CacheError naming why: this
        process keeps it in memory, but the next one would compile it again."""
        compiled = ctypes.c_int(0)
        _lib.check(_lib.lib().ktune_compile(self.handle, _lib.cstr(family), _lib.cstr(problem_key(family, problem)),
                                            _lib.cstr(config), _lib.cstr(arch), ctypes.byref(compiled)),
                   "ktune_compile")
        return bool(compiled.value)


_default = None
_default_lock = threading.Lock()


def runtime() -> Runtime:
    """The process-wide default runtime (environment options), created on first use; used by every op that is
    not given one (and always by the torch ops)."""
    global _default
    if _default is None:
        with _default_lock:
            if _default is None:
                _default = Runtime()
    return _default


def set_runtime(rt: Optional[Runtime]) -> None:
    """Replaces the default runtime (e.g. one over a shipped read-only cache with allow_jit=False); None goes back
    to a runtime made from the environment on next use."""
    global _default
    if rt is not None and not isinstance(rt, Runtime):
        raise invalid(f"ktune.set_runtime: rt: expected a ktune.Runtime or None, got {type(rt).__name__}")
    with _default_lock:
        _default = rt


_key_cache = {}
# torch's dtype names (and torch.dtype objects, which print as "torch.<name>") for the problem fields' dtypes
_DTYPE_ALIASES = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "float8_e4m3fn": "fp8"}


def _dtype_value(v):
    if isinstance(v, str) or type(v).__name__ == "dtype":
        name = str(v)
        name = name[6:] if name.startswith("torch.") else name
        return _DTYPE_ALIASES.get(name, name)
    return v


def problem_key(family: str, problem: Union[str, dict]) -> str:
    """Canonical problem key of `family` from a key string, a JSON object text or a dict of problem fields
    (docs/presets.md). Errors name the field. In a dict, a *_dtype field may also be a torch.dtype or its name
    (torch.bfloat16, "float8_e4m3fn", ...)."""
    if isinstance(problem, dict):
        fields = {k: _dtype_value(v) if k.endswith("_dtype") else v for k, v in problem.items()}
        text = json.dumps(fields, separators=(",", ":"))
    elif isinstance(problem, str):
        text = problem
    else:
        raise invalid(f"ktune.problem_key: problem: expected a key string or a dict of fields, got "
                      f"{type(problem).__name__}")
    if not isinstance(family, str):
        raise invalid(f"ktune.problem_key: family: expected a string, got {type(family).__name__}")
    k = (family, text)
    hit = _key_cache.get(k)
    if hit is not None:
        return hit
    out = ctypes.c_char_p()
    _lib.check(_lib.lib().ktune_problem_key(family.encode(), text.encode(), ctypes.byref(out)), "ktune_problem_key")
    key = out.value.decode()
    _key_cache[k] = key
    return key


def xqa_problem(head_dim: int, num_q_heads: int, num_kv_heads: int, **fields) -> str:
    """The canonical xqa_decode problem key from its fields: head_dim, num_q_heads, num_kv_heads, page_size,
    layout ("hnd"/"nhd"), q_dtype/kv_dtype/out_dtype ("bf16"/"fp16"/"fp8"), max_q_len, mask
    ("none"/"causal"/"explicit"), sinks, sliding_window, softcap, lse."""
    return problem_key("xqa_decode", dict(head_dim=head_dim, num_q_heads=num_q_heads, num_kv_heads=num_kv_heads,
                                          **fields))


def _names(fn) -> List[str]:
    out = ctypes.c_char_p()
    _lib.check(fn(ctypes.byref(out)))
    s = out.value.decode()
    return [x for x in s.split(",") if x]


def families() -> List[str]:
    return _names(_lib.lib().ktune_family_names)


def presets() -> List[str]:
    return _names(_lib.lib().ktune_preset_names)


def ensure_device(ordinal: int) -> None:
    """Makes GPU `ordinal`'s primary context (the one PyTorch uses) current on this thread."""
    _lib.check(_lib.lib().ktune_ensure_device(int(ordinal)), "ktune_ensure_device")


@dataclass
class WarmupReport:
    preset: str
    keys: int = 0
    tuned: int = 0
    already_done: int = 0
    skipped: int = 0
    failed: int = 0
    compile_jobs: int = 0
    compiled: int = 0
    cache_hits: int = 0
    compile_failed: int = 0
    compile_wall_ms: float = 0.0
    tune_ms: float = 0.0
    wall_ms: float = 0.0
    budget_exhausted: bool = False
    device: Optional[int] = None
    items: list = field(default_factory=list)  # [{"arch","family","key","status","winner","ms"}]


def _auto_device() -> Optional[int]:
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.cuda.is_available():
                return torch.cuda.current_device()
            return None
        except Exception:
            return None
    try:
        ensure_device(0)
        return 0
    except KtuneError:  # no driver / no GPU: compile only
        return None


class _StderrProgress:
    def __init__(self, preset):
        self.preset, self.phase, self.last = preset, None, 0.0

    def __call__(self, what, done, total):
        phase = "compile" if what == "compile" else "tune"
        now = time.monotonic()
        if phase != self.phase or done == total or now - self.last >= 5.0:
            detail = "" if phase == "compile" else f" ({what})"
            print(f"ktune warmup {self.preset}: {phase} {done}/{total}{detail}", file=sys.stderr, flush=True)
            self.phase, self.last = phase, now


def warmup(preset: str, *, arch: Union[None, str, Sequence[str]] = None, kv_dtype: Optional[str] = None,
           max_batch: Optional[int] = None, max_seq_len: Optional[int] = None, spec_tokens: Optional[int] = None,
           default_only: bool = False, budget_s: float = 0.0, jobs: int = 0, device: Union[None, int, str] = "auto",
           runtime: Optional[Runtime] = None, check: bool = True,
           progress: Union[bool, Callable[[str, int, int], None]] = True,
           devices: Union[None, str, int, Sequence[int]] = None, workers: int = 0,
           retune: bool = False) -> WarmupReport:
    """`ktune warmup` in process: compiles every kernel a model preset needs and tunes every (op, batch bucket,
    seq-len bucket) key on the GPU (and/or on the host CPU with arch="host"), storing both in the cache.

    preset: an embedded name (ktune.presets()) or a preset JSON file. arch: None = the GPU's arch (without a GPU:
    every default arch); "host" = this CPU through the LLVM backend; or a list such as ["sm_90a", "host"].
    device: "auto" = torch's current CUDA device if torch is imported, else GPU 0 if present, else none
    (compile only); an int = that GPU; None = no GPU. check: raise KtuneError if any key failed.
    progress: True prints a line to stderr per phase change and at most every 5 s (a long warmup never looks
    hung); False is silent; a callable gets (what, done, total): what = "compile" or the tuning key just done.
    devices: "all", a GPU ordinal or a list of them: tune in one worker process per GPU (keys dealt out from a
    shared queue; compiles done once here first; `device` is then not used); the workers run the ktune CLI,
    found as $KTUNE_CLI or beside libktune.so. workers: that many host CPU worker processes for arch "host"
    keys (arch must include "host"). Progress then names the worker: "[dev 1] 12/71 <key>". retune: measure
    again the keys this ktune version has already tuned, replacing their rows (`ktune warmup --retune`); by
    default they count as already_done."""
    rt = runtime or globals()["runtime"]()
    if not isinstance(preset, str) or not preset:
        raise invalid("ktune.warmup: preset: expected a preset name or a JSON file path")
    if arch is None:
        arches = None
    elif isinstance(arch, str):
        arches = arch
    else:
        arches = ",".join(arch)
    for name, v in (("max_batch", max_batch), ("max_seq_len", max_seq_len)):
        if v is not None and (not isinstance(v, int) or v <= 0):
            raise invalid(f"ktune.warmup: {name}: expected a positive integer, got {v!r}")
    if spec_tokens is not None and (not isinstance(spec_tokens, int) or spec_tokens < 0):
        raise invalid(f"ktune.warmup: spec_tokens: expected an integer >= 0, got {spec_tokens!r}")
    if devices is None:
        devices_text = None
    elif devices == "all":
        devices_text = "all"
    elif isinstance(devices, int) and not isinstance(devices, bool):
        devices_text = str(devices)
    elif (not isinstance(devices, str) and isinstance(devices, Sequence) and devices
          and all(isinstance(d, int) and not isinstance(d, bool) for d in devices)):
        devices_text = ",".join(str(d) for d in devices)
    else:
        raise invalid(f"ktune.warmup: devices: expected None, \"all\", a GPU ordinal or a list of them, got {devices!r}")
    if not isinstance(retune, bool):
        raise invalid(f"ktune.warmup: retune: expected True or False, got {retune!r}")
    if not isinstance(workers, int) or isinstance(workers, bool) or workers < 0:
        raise invalid(f"ktune.warmup: workers: expected an integer >= 0, got {workers!r}")
    if devices_text is not None:
        dev = None  # every GPU is a worker's; this process only compiles
    elif device == "auto":
        dev = _auto_device()
    elif device is None:
        dev = None
    elif isinstance(device, int) and device >= 0:
        dev = device
    else:
        raise invalid(f"ktune.warmup: device: expected \"auto\", None or a GPU ordinal >= 0, got {device!r}")
    L = _lib.lib()
    o = _lib._WarmupOptions()
    L.ktune_warmup_options_default(ctypes.byref(o))
    keep = [preset.encode(), _lib.cstr(arches), _lib.cstr(kv_dtype)]
    o.preset, o.arches, o.kv_dtype = keep
    o.max_batch = _lib.c_int("ktune.warmup: max_batch", max_batch or 0)
    o.max_seq_len = _lib.c_int("ktune.warmup: max_seq_len", max_seq_len or 0)
    o.spec_tokens = -1 if spec_tokens is None else _lib.c_int("ktune.warmup: spec_tokens", spec_tokens)
    o.all_candidates = 0 if default_only else 1
    o.budget_s = float(budget_s)
    o.jobs = _lib.c_int("ktune.warmup: jobs", jobs)
    o.device = -1 if dev is None else dev
    if progress is True:
        progress = _StderrProgress(preset)
    cb = None
    if callable(progress):
        user_fn = progress

        def _cb(what, done, total, _user):
            user_fn(what.decode("utf-8", "replace") if what else "", int(done), int(total))

        cb = _lib.PROGRESS_FN(_cb)  # referenced until the call returns
        o.progress = ctypes.cast(cb, ctypes.c_void_p)
    elif progress not in (False, None):
        raise invalid(f"ktune.warmup: progress: expected True, False or a callable, got {progress!r}")
    r = _lib._WarmupResult()
    req = _lib._WarmupRequest()
    L.ktune_warmup_request_default(ctypes.byref(req))
    req.options = ctypes.pointer(o)
    req.devices = _lib.cstr(devices_text)
    req.host_workers = workers
    req.retune = 1 if retune else 0
    _lib.check(L.ktune_warmup_run(rt.handle, ctypes.byref(req), ctypes.byref(r)), "ktune_warmup")
    del cb
    rep = WarmupReport(preset=preset, device=dev, items=json.loads(r.items_json.decode() if r.items_json else "[]"))
    for name, _ in _lib._WarmupResult._fields_:
        if name != "items_json":
            setattr(rep, name, getattr(r, name))
    rep.budget_exhausted = bool(rep.budget_exhausted)
    if check and (rep.failed or rep.compile_failed):
        bad = [f"{i['arch']} {i['key']}: {i['status']}" for i in rep.items if i["status"].startswith("failed")]
        if rep.compile_failed:  # compile jobs carry no item of their own: the reasons are in the log
            bad.append(f"{rep.compile_failed} compile job(s) did not compile or were not stored in the cache "
                       "(the warnings logged above name each one and why)")
        raise error_for_status(3, f"ktune.warmup: {rep.failed} key(s) and {rep.compile_failed} compile(s) failed: "
                               + "; ".join(bad[:6]))
    return rep
