#!/usr/bin/env python3
"""Host cost of the Python side of ktune.ops.XqaDecodeOp.__call__, and what it is made of.

  op      (default) the op's call with its final ctypes launch replaced by a no-op, on the inputs of
          bench/bench_dispatch.py (Llama-3.1-8B decode B1 L512, 32/8 heads, d128, page 32), median of many reps.
          --tensors torch: real torch CUDA tensors (the C op is prepared and planned for real; only the launch is
          skipped); --tensors fake: python/tests/fake_torch.py tensors and a stand-in C op (no torch, no GPU).
          The fake's attribute reads are Python properties (~0.1 us here), torch's cost 0.19-0.38 us each on
          the H200 host; the fake run also counts the tensor reads per call. --tensors fake-cheap: reads of
          ~0.03 us (plain attributes), so the time is the op's own Python work. --compare OPS_PY times another
          version of ops.py (e.g. main's, without the test seam) in the same process, interleaved with this tree's:
          before/after on the same inputs under the same machine load.
  costs   per-operation costs on torch tensors (attribute reads, ctypes field writes and calls, stream queries);
          needs torch with CUDA.
  guards  which cheap guards see which in-place metadata change of one tensor object (resize_, as_strided_,
          set_, the .data setter, a data write): torch's _version, (data_ptr, shape, stride), the facts the op
          compares (shape, stride, dtype, device) and dynamo's private C++ TensorGuards (one call for many
          tensors: a candidate to replace most reads, if it sees every change); needs torch (CUDA for the
          device move).

  PYTHONPATH=python KTUNE_LIBRARY=build/lib/libktune.so python3 bench/dev/py_call_costs.py [op|costs|guards]
      [--tensors torch|fake|fake-cheap] [--calls 2000] [--reps 21] [--clock wall|cpu] [--compare OPS_PY]
"""
import argparse
import ctypes
import gc
import os
import statistics
import sys
import time
import types

B, L, HQ, HKV, D, PAGE = 1, 512, 32, 8, 128, 32
KEY = f"d{D}.h{HQ}.kv{HKV}.p{PAGE}.hnd.bf16-bf16-bf16.q1.none"
FAKE_WORKSPACE_BYTES = 1 << 18  # the fake plan's split workspace (16 splits of B1 need ~270 KB)


def load_torch(kind):
    if kind == "torch":
        import torch
        return torch
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tests"))
    import fake_torch
    return fake_torch


class NoLaunch:
    """The C op of an XqaDecodeOp with its launch a no-op: prepared and planned by `real` when given."""

    def __init__(self, real=None):
        self.real = real
        self._handle = real._handle if real is not None else ctypes.c_void_p(1)

    def _run_on_device(self, handle, ref, stream, device):
        return 0

    def plan(self, ref):
        return self.real.plan(ref) if self.real is not None else {"workspace_bytes": FAKE_WORKSPACE_BYTES}


def load_ops(path):
    """ktune.ops as another version of ops.py defines it (e.g. `git show main:python/ktune/ops.py > F`), loaded
    beside this tree's as the module ktune._ops_compare: its relative imports find this tree's modules."""
    import importlib.util
    spec = importlib.util.spec_from_file_location("ktune._ops_compare", path)
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "ktune"
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def make_op(ops, torch, fake):
    """An XqaDecodeOp of KEY from the module `ops` whose launches do nothing."""
    from ktune import _lib
    real = None if fake else ops.Op("xqa_decode", KEY)
    c_op = NoLaunch(real)
    ensure = (lambda index: 0) if fake else _lib.lib().ktune_ensure_device
    if hasattr(ops.XqaDecodeOp, "_unprepared"):
        return ops.XqaDecodeOp._unprepared(KEY, c_op, torch, ensure)
    # an older ktune.ops without the seam: its attributes as its __init__ sets them
    import math
    from ktune.xqa import parse_key
    op = ops.XqaDecodeOp.__new__(ops.XqaDecodeOp)
    op.info = parse_key(KEY)
    op._op = c_op
    op._args = _lib._XqaArgs()
    _lib.lib().ktune_xqa_args_default(ctypes.byref(op._args))
    op._ref = ctypes.byref(op._args)
    op._seen, op._sig = {}, None
    op._stream = torch._C._cuda_getCurrentRawStream
    op._tensor = torch.Tensor
    op._ensure_device = ensure
    op._default_scale = 1.0 / math.sqrt(op.info.head_dim)
    op._last = (object(),) * len(op._FIELDS)
    if fake:  # its full check imports _desc from ktune.torch_ops, which needs torch: the same conversion here
        tags = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "f32", torch.int32: "i32",
                torch.uint8: "u8", torch.int16: "i16"}
        from ktune.xqa import Desc

        def _desc(name, t):
            if t is None:
                return None
            d = t.device
            return Desc(tuple(t.shape), tags.get(t.dtype, str(t.dtype)), t.is_contiguous(), t.data_ptr(),
                        f"{d.type}:{d.index}", tuple(t.stride()))
        stub = types.ModuleType("ktune.torch_ops")
        stub._desc = _desc
        sys.modules["ktune.torch_ops"] = stub
        sys.modules["torch"] = torch  # its workspace allocation imports torch
    return op


def cheap(torch, t):
    """A fake tensor whose reads are plain attributes and constant-returning methods (~0.03 us each): an op's time
    on these is its own Python work."""
    class Cheap(torch.Tensor):
        shape = dtype = device = nbytes = None

    c = Cheap.__new__(Cheap)
    c.__dict__.update(t.__dict__)
    c.shape, c.dtype, c.device, c.nbytes = t.shape, t.dtype, t.device, t.nbytes
    st, contiguous, ptr = t.stride(), t.is_contiguous(), t.data_ptr()
    c.stride, c.is_contiguous, c.data_ptr = (lambda: st), (lambda: contiguous), (lambda: ptr)
    return c


def inputs(torch, cheap_reads=False):
    dev = "cuda:0"
    pages = L // PAGE
    bf16, i32 = torch.bfloat16, torch.int32
    t = dict(q=torch.empty(B, HQ, D, dtype=bf16, device=dev), q2=torch.empty(B, HQ, D, dtype=bf16, device=dev),
             kv=torch.empty(pages, 2, HKV, PAGE, D, dtype=bf16, device=dev),
             k=torch.empty(pages, HKV, PAGE, D, dtype=bf16, device=dev),
             v=torch.empty(pages, HKV, PAGE, D, dtype=bf16, device=dev),
             bt=torch.empty(B, pages, dtype=i32, device=dev), sl=torch.empty(B, dtype=i32, device=dev),
             out=torch.empty(B, HQ, D, dtype=bf16, device=dev), ws=torch.empty(1 << 20, dtype=torch.uint8, device=dev),
             ks=torch.empty(1, dtype=torch.float32, device=dev), vs=torch.empty(1, dtype=torch.float32, device=dev))
    if hasattr(torch, "zeros") and hasattr(torch, "cuda"):  # real tensors: valid block tables and lengths
        t["bt"] = torch.arange(pages, dtype=i32, device=dev).reshape(B, pages)
        t["sl"] = torch.full((B,), L, dtype=i32, device=dev)
    if cheap_reads:
        t = {k: cheap(torch, v) for k, v in t.items()}
    return t


def ways(op, t):
    qs = [t["q"], t["q2"]]
    step = [0]

    def new_q_each_call():
        step[0] ^= 1
        op(qs[step[0]], t["kv"], t["bt"], t["sl"], max_seq_len=L, out=t["out"], workspace=t["ws"])

    return [
        ("XqaDecodeOp, workspace given (bench_dispatch's row)",
         lambda: op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=L, out=t["out"], workspace=t["ws"])),
        ("XqaDecodeOp, workspace from torch", lambda: op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=L,
                                                          out=t["out"])),
        ("XqaDecodeOp, another q every call", new_q_each_call),
        ("XqaDecodeOp, K/V pair + tensor k/v scales",
         lambda: op(t["q"], (t["k"], t["v"]), t["bt"], t["sl"], max_seq_len=L, out=t["out"], workspace=t["ws"],
                    k_scale=t["ks"], v_scale=t["vs"])),
    ]


CLOCK = time.perf_counter


def median_us(fn, calls, reps):
    per = []
    gc.disable()
    try:
        for _ in range(reps):
            t0 = CLOCK()
            for _ in range(calls):
                fn()
            per.append((CLOCK() - t0) * 1e6 / calls)
    finally:
        gc.enable()
    return statistics.median(per), min(per), max(per)


def count_reads(torch, fn):
    """Tensor attribute reads and method calls of one call of fn (fake tensors only)."""
    counts = {}
    names = ("shape", "dtype", "device", "nbytes", "stride", "is_contiguous", "data_ptr", "numel", "element_size",
             "size", "dim")
    saved = {n: torch.Tensor.__dict__[n] for n in names}

    def counted(name, attr):
        if isinstance(attr, property):
            return property(lambda self: (counts.__setitem__(name, counts.get(name, 0) + 1), attr.fget(self))[1])
        return lambda self, *a: (counts.__setitem__(name, counts.get(name, 0) + 1), attr(self, *a))[1]
    try:
        for n, attr in saved.items():
            setattr(torch.Tensor, n, counted(n, attr))
        fn()
    finally:
        for n, attr in saved.items():
            setattr(torch.Tensor, n, attr)
    return counts


def timed(fn, calls):
    t0 = CLOCK()
    for _ in range(calls):
        fn()
    return (CLOCK() - t0) * 1e6 / calls


def run_op(args):
    from ktune import ops as this_ops
    fake = args.tensors != "torch"
    torch = load_torch(args.tensors)
    if not fake:
        torch.cuda.set_device(0)
    t = inputs(torch, args.tensors == "fake-cheap")
    versions = [("this tree", make_op(this_ops, torch, fake))]
    if args.compare:
        versions.append((args.compare, make_op(load_ops(args.compare), torch, fake)))
    print(f"XqaDecodeOp.__call__ with a no-op launch; tensors: {args.tensors}; python {sys.version.split()[0]}; "
          f"{KEY} B{B} L{L}")
    print(f"{args.reps} reps of {args.calls} calls, {args.clock} clock; each rep times every version in turn "
          f"(the same inputs, interleaved), us per call\n")
    heads = " | ".join(f"{v}: median | min" for v, _ in versions)
    print(f"| way | {heads} | tensor reads per call |\n|---|" + "---|---|" * len(versions) + "---|")
    if args.tensors == "fake":  # what the fake's reads cost by themselves, to tell the ops' own work from them
        def reads_alone(q=t["q"], out=t["out"], kv=t["kv"], bt=t["bt"], sl=t["sl"], ws=t["ws"]):
            for x in (q, out):
                x.shape, x.stride(), x.dtype, x.device, x.data_ptr()
            for x in (kv, bt, sl):
                x.shape, x.is_contiguous(), x.dtype, x.device, x.data_ptr()
            ws.nbytes, ws.device, ws.is_contiguous(), ws.data_ptr()
        med, lo, _ = median_us(reads_alone, args.calls, args.reps)
        print(f"| 29 fake tensor reads (this tree's op, first row), alone | {med:.2f} | {lo:.2f} |"
              + " | |" * (len(versions) - 1) + " 29 |")
    for i, (name, _) in enumerate(ways(versions[0][1], t)):
        fns = [ways(op, t)[i][1] for _, op in versions]
        for fn in fns:
            fn()
            fn()  # the first call checks in full; time the steady state
        per = [[] for _ in fns]
        gc.disable()
        try:
            for _ in range(args.reps):
                for j, fn in enumerate(fns):
                    per[j].append(timed(fn, args.calls))
        finally:
            gc.enable()
        cells = " | ".join(f"{statistics.median(p):.2f} | {min(p):.2f}" for p in per)
        reads = ""
        if args.tensors == "fake":
            reads = " / ".join(
                f"{sum(c.values())} (" + ", ".join(f"{k} {v}" for k, v in sorted(c.items())) + ")"
                for c in (count_reads(torch, fn) for fn in fns))
        print(f"| {name} | {cells} | {reads} |")


def tensor_guards(torch):
    """Dynamo's C++ tensor guard class (private; its constructor differs across torch versions) as a function of
    the tensors it records, or None."""
    try:
        from torch._C._dynamo.guards import TensorGuards
    except Exception:  # noqa: BLE001
        return None

    def make(*tensors):
        try:
            return TensorGuards(*tensors, dynamic_dims_sizes=None, dynamic_dims_strides=None)
        except TypeError:
            return TensorGuards(*tensors, dynamic_shapes=False)
    return make


def run_costs(args):
    import torch
    from ktune import _lib
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    t = torch.empty(4, 32, 128, device=dev, dtype=torch.bfloat16)
    a = _lib._XqaArgs()
    lib = _lib.lib()
    lib.ktune_xqa_args_default(ctypes.byref(a))
    raw = getattr(torch._C, "_cuda_getCurrentRawStream")
    fid = lib.ktune_family_id
    fid.argtypes = [ctypes.c_char_p]
    fid.restype = ctypes.c_uint32
    d, sig = {}, (t.shape, t.dtype, t.device, True) * 5
    tests = {
        "t.shape": lambda: t.shape, "t.dtype": lambda: t.dtype, "t.device": lambda: t.device,
        "t.is_contiguous()": lambda: t.is_contiguous(), "t.data_ptr()": lambda: t.data_ptr(),
        "t.get_device()": lambda: t.get_device(), "t.stride()": lambda: t.stride(), "t.nbytes": lambda: t.nbytes,
        "t._version": lambda: t._version, "a.q = int": lambda: setattr(a, "q", 12345),
        "a.softcap = float": lambda: setattr(a, "softcap", 1.0), "ctypes noop (ktune_family_id)": lambda: fid(None),
        "raw stream": lambda: raw(0),
        "current_stream().cuda_stream": lambda: torch.cuda.current_stream(dev).cuda_stream,
        "ensure_device": lambda: lib.ktune_ensure_device(0),
        "tuple of 20": lambda: (t.shape, t.dtype, t.shape, t.dtype, t.shape, t.dtype, t.shape, t.dtype, t.shape,
                                t.dtype, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10),
        "hash+dict get": lambda: d.get(sig),
    }
    five = [torch.empty(4, 32, 128, device=dev, dtype=torch.bfloat16) for _ in range(5)]
    try:
        tg = tensor_guards(torch)(*five)
        tests["TensorGuards.check of 5 tensors (private)"] = lambda: tg.check(*five)
    except Exception as e:  # noqa: BLE001
        print(f"(TensorGuards not timed: {type(e).__name__}: {e})")
    for k, f in tests.items():
        print(f"{k:32s} {median_us(f, args.calls, args.reps)[0] * 1000:8.0f} ns")


def run_guards(args):
    """Each in-place change on a fresh tensor; for each guard whether its value differs afterwards."""
    import torch
    cuda = torch.cuda.is_available()
    dev = "cuda:0" if cuda else "cpu"

    def fresh():
        return torch.zeros(4, 8, dtype=torch.bfloat16, device=dev)

    changes = {
        "resize_ (other shape)": lambda t: t.resize_(2, 8),
        "resize_ (same shape)": lambda t: t.resize_(4, 8),
        "as_strided_ (transposed strides)": lambda t: t.as_strided_((4, 8), (1, 4)),
        "set_ (another tensor)": lambda t: t.set_(torch.zeros(4, 8, dtype=torch.bfloat16, device=dev)),
        "t.data = t.view(float16)": lambda t: setattr(t, "data", t.view(torch.float16)),
        "t.data = another dtype": lambda t: setattr(t, "data", torch.zeros(4, 8, dtype=torch.float32, device=dev)),
        "unsqueeze_": lambda t: t.unsqueeze_(0),
        "t.add_(1) (data only)": lambda t: t.add_(1),
    }
    if cuda:
        changes["t.data = t.cpu()"] = lambda t: setattr(t, "data", t.cpu())
    guards = {
        "_version": lambda t: t._version,
        "(data_ptr, shape, stride)": lambda t: (t.data_ptr(), t.shape, t.stride()),
        "(shape, stride, dtype, device)": lambda t: (t.shape, t.stride(), t.dtype, t.device),
    }
    make_tg = tensor_guards(torch)
    if make_tg is not None:
        class Recorded:  # compares as "the guard made before the change still passes"
            def __init__(self, t):
                self.guard, self.t = make_tg(t), t

            def __ne__(self, other):
                return not self.guard.check(self.t)
        guards["dynamo TensorGuards (private)"] = Recorded
    print(f"torch {torch.__version__}; tensor on {dev}; 'changed' = the guard's value differs after the change "
          f"(the op reads data_ptr() at every call besides its facts, so a new address alone needs no guard)\n")
    print("| in-place change | " + " | ".join(guards) + " |\n|---|" + "---|" * len(guards))
    for name, change in changes.items():
        row = []
        for g in guards.values():
            t = fresh()
            try:
                before = g(t)
                change(t)
                row.append("changed" if before != g(t) else "SAME")
            except Exception as e:  # noqa: BLE001 (a change torch refuses is a result too)
                row.append(f"error: {type(e).__name__}: {str(e).splitlines()[0][:60]}")
        print(f"| {name} | " + " | ".join(row) + " |")
    with torch.inference_mode():
        t = fresh()
    try:
        t._version
        print("\ninference tensor: _version readable")
    except Exception as e:  # noqa: BLE001
        print(f"\ninference tensor: _version raises {type(e).__name__}: {str(e).splitlines()[0][:80]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="?", default="op", choices=("op", "costs", "guards"))
    ap.add_argument("--tensors", choices=("torch", "fake", "fake-cheap"))
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--reps", type=int, default=21)
    ap.add_argument("--compare", metavar="OPS_PY",
                    help="op: also time the XqaDecodeOp of this ops.py (another version of python/ktune/ops.py)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this thread's CPU time, which leaves out the time other processes hold the cores "
                         "(a shared machine); wall: what a caller waits")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.thread_time if args.clock == "cpu" else time.perf_counter
    if args.tensors is None:
        try:
            import torch
            args.tensors = "torch" if torch.cuda.is_available() else "fake"
        except ImportError:
            args.tensors = "fake"
    {"op": run_op, "costs": run_costs, "guards": run_guards}[args.what](args)


if __name__ == "__main__":
    main()
