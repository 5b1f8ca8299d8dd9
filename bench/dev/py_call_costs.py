# Per-operation host cost of what a Python op call does on torch tensors (attribute reads, ctypes field
# writes and calls, stream queries), to budget ktune.ops.XqaDecodeOp.__call__. Run on a GPU machine:
#   PYTHONPATH=python KTUNE_LIBRARY=build/lib/libktune.so.0 python3 bench/dev/py_call_costs.py
import ctypes, time, torch, ktune
from ktune import _lib
dev = torch.device("cuda", 0); torch.cuda.set_device(dev)
t = torch.empty(4, 32, 128, device=dev, dtype=torch.bfloat16)
a = _lib._XqaArgs(); L = _lib.lib(); L.ktune_xqa_args_default(ctypes.byref(a))
raw = getattr(torch._C, "_cuda_getCurrentRawStream")
fid = L.ktune_family_id; fid.argtypes=[ctypes.c_char_p]; fid.restype=ctypes.c_uint32
tests = {
 "t.shape": lambda: t.shape, "t.dtype": lambda: t.dtype, "t.device": lambda: t.device,
 "t.is_contiguous()": lambda: t.is_contiguous(), "t.data_ptr()": lambda: t.data_ptr(), "t.get_device()": lambda: t.get_device(),
 "t.stride()": lambda: t.stride(), "a.q = int": lambda: setattr(a, "q", 12345), "a.softcap = float": lambda: setattr(a, "softcap", 1.0),
 "ctypes noop (ktune_family_id)": lambda: fid(None), "raw stream": lambda: raw(0),
 "current_stream().cuda_stream": lambda: torch.cuda.current_stream(dev).cuda_stream,
 "ensure_device": lambda: L.ktune_ensure_device(0), "tuple of 20": lambda: (t.shape, t.dtype, t.shape, t.dtype, t.shape, t.dtype, t.shape, t.dtype, t.shape, t.dtype, 1,2,3,4,5,6,7,8,9,10),
 "hash+dict get": None,
}
d = {}
sig = (t.shape, t.dtype, t.device, True) * 5
tests["hash+dict get"] = lambda: d.get(sig)
for k, f in tests.items():
    n = 20000
    t0 = time.perf_counter()
    for _ in range(n): f()
    print(f"{k:32s} {(time.perf_counter()-t0)*1e9/n:8.0f} ns")
