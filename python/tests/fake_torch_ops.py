"""ktune.torch_ops and ktune.torch_families imported over fake_torch, so the argument checks of the torch
wrappers and custom ops can be tested on a machine without torch or a GPU. Inside `installed()`,
sys.modules["torch"] is a module holding fake_torch's names, a torch.library.custom_op that registers the
function itself under torch.ops.<namespace> (no dispatcher: a call runs the real implementation, which performs
the checks) and torch.cuda.current_stream; on exit the modules and package attributes it replaced are put
back, so a real torch (where one is installed) and the tests that use it are unaffected.

Nothing launches: the tests replace the step before a launch (ktune.torch_families._ensure_device,
ktune.torch_ops.prepared_op) with stand-ins, and a call that passes every check raises Launched there."""

import contextlib
import sys
import types

import fake_torch


class Launched(Exception):
    """Every argument check passed and the call went on to the device."""


def launched(*args, **kwargs):
    raise Launched()


def _module():
    m = types.ModuleType("torch")
    for name in dir(fake_torch):
        if not name.startswith("__"):
            setattr(m, name, getattr(fake_torch, name))
    m.__version__ = "0.0+fake"
    m.ops = types.SimpleNamespace()

    def custom_op(name, mutates_args=()):
        namespace, op = name.split("::")

        def register(fn):
            if not hasattr(m.ops, namespace):
                setattr(m.ops, namespace, types.SimpleNamespace())
            setattr(getattr(m.ops, namespace), op, fn)
            fn.register_fake = lambda fake: fake
            return fn
        return register

    m.library = types.SimpleNamespace(custom_op=custom_op)
    m.cuda = types.SimpleNamespace(current_stream=lambda device=None: types.SimpleNamespace(cuda_stream=0))
    return m


_MODULES = ("torch", "ktune.torch_ops", "ktune.torch_families")
_ATTRS = ("torch_ops", "torch_families")
_MISSING = object()


@contextlib.contextmanager
def installed():
    """Yields (ktune.torch_ops, ktune.torch_families) as imported over fake_torch."""
    import ktune
    saved = {name: sys.modules.get(name, _MISSING) for name in _MODULES}
    saved_attrs = {name: getattr(ktune, name, _MISSING) for name in _ATTRS}
    try:
        for name in _MODULES[1:]:
            sys.modules.pop(name, None)
        sys.modules["torch"] = _module()
        from ktune import torch_ops
        yield torch_ops, torch_ops._fam()
    finally:
        for name, mod in saved.items():
            if mod is _MISSING:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = mod
        for name, value in saved_attrs.items():
            if value is _MISSING:
                if hasattr(ktune, name):
                    delattr(ktune, name)
            else:
                setattr(ktune, name, value)
