"""Exceptions carrying the library's status and message (ktune_last_error)."""

from __future__ import annotations

# ktune_status values (runtime/include/ktune/ktune.h)
OK = 0
INVALID_ARGUMENT = 1
NOT_FOUND = 2
COMPILE = 3
CUDA = 4
CACHE = 5
JIT_DISABLED = 6
NO_DRIVER = 7
NO_COMPILER = 8
UNSUPPORTED = 9
INTERNAL = 10

_NAMES = {OK: "ok", INVALID_ARGUMENT: "invalid_argument", NOT_FOUND: "not_found", COMPILE: "compile_error",
          CUDA: "cuda_error", CACHE: "cache_error", JIT_DISABLED: "jit_disabled", NO_DRIVER: "no_driver",
          NO_COMPILER: "no_compiler", UNSUPPORTED: "unsupported", INTERNAL: "internal"}


class KtuneError(RuntimeError):
    """A failed ktune call. `status` is the ktune_status code, `status_name` its name, `message` the library's
    text (which names the field and what was expected for bad arguments)."""

    def __init__(self, message, status=INTERNAL, status_name=None):
        super().__init__(message)
        self.message = message
        self.status = int(status)
        self.status_name = status_name or _NAMES.get(self.status, str(status))

    def __str__(self):
        return f"{self.message} [{self.status_name}]"

    def __reduce__(self):
        return (type(self), (self.message, self.status, self.status_name))


class InvalidArgumentError(KtuneError, ValueError):
    def __init__(self, message, status=INVALID_ARGUMENT, status_name=None):
        super().__init__(message, status, status_name)


class NotFoundError(KtuneError, LookupError):
    pass


class CompileError(KtuneError):
    pass


class CudaError(KtuneError):
    pass


class CacheError(KtuneError):
    pass


class JitDisabledError(KtuneError):
    pass


class NoDriverError(KtuneError):
    pass


class NoCompilerError(KtuneError):
    pass


class UnsupportedError(KtuneError):
    pass


_CLASSES = {INVALID_ARGUMENT: InvalidArgumentError, NOT_FOUND: NotFoundError, COMPILE: CompileError, CUDA: CudaError,
            CACHE: CacheError, JIT_DISABLED: JitDisabledError, NO_DRIVER: NoDriverError,
            NO_COMPILER: NoCompilerError, UNSUPPORTED: UnsupportedError}


def error_for_status(status, message, status_name=None):
    cls = _CLASSES.get(int(status), KtuneError)
    return cls(message, int(status), status_name)


def invalid(message):
    """An argument error raised by the Python layer (same class and status as the library's)."""
    return InvalidArgumentError(message)


def refuse_broadcast(where, shape, strides):
    """Raises invalid for a stride of 0 on a dimension of more than one element (a numpy broadcast or a torch
    expand view). The library reads a stride of 0 as "dense", so passed on it would make the kernel read (or for
    an output, write) past the view's memory. `where` is "<family>: <argument>"."""
    if any(int(n) > 1 and int(st) == 0 for n, st in zip(shape, strides)):
        raise invalid(f"{where}: expected no stride of 0 on a dimension of extent > 1 (a broadcast or expanded view; "
                      f"make it contiguous first), got shape {list(shape)} and strides {tuple(strides)}")


def device_name(a):
    """The device an array lives on, as torch spells it ("cuda:1", "cpu"): a torch tensor's device; a NumPy array
    (no torch device) is host memory, "cpu"."""
    d = getattr(a, "device", None)
    return "cpu" if d is None else str(d)


def same_device(where, named):
    """Raises invalid unless the arrays of `named`, (argument name, array) pairs with None skipped, all live on the
    device of the first array: CUDA tensors on another device index are refused like host arrays, the error naming
    the first argument off that device and both devices. `where` is the family ("xqa_decode")."""
    ref_name = want = None
    for name, a in named:
        if a is None:
            continue
        dev = device_name(a)
        if want is None:
            ref_name, want = name, dev
        elif dev != want:
            raise invalid(f"{where}: {name}: expected the device of {ref_name} ({want}), got {dev}")


def refuse_readonly(where, a):
    """Raises invalid for a NumPy output array that is not writeable (a read-only view, np.broadcast_to, a
    frombuffer over bytes): the library would write into memory the caller marked read-only. `where` is
    "<family>: <argument>"; None and torch tensors pass."""
    if not getattr(getattr(a, "flags", None), "writeable", True):
        raise invalid(f"{where}: expected a writeable array (the results go there), got a read-only one")

