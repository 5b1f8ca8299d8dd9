#!/usr/bin/env python3
"""Host cost of one xqa_decode call from Python, with the GPU kept busy (torch.cuda._sleep) so no launch waits:
the prepared op object (ktune.ops.XqaDecodeOp), the torch custom op (torch.ops.ktune.xqa_decode_out), the
functional ktune.xqa_decode (allocates its output), a bare ctypes ktune_op_run on a ready struct (the floor of a
Python -> C call into ktune), two ctypes cuLaunchKernel calls of an empty kernel (what two launches cost a Python
caller at least: this xqa_decode call is decode + combine), and PyTorch SDPA (cuDNN) on contiguous K/V of the same size in the same process,
each on the legacy default stream (torch's default) and on a side stream.
Llama-3.1-8B decode, B1, L512 (bench_dispatch.cpp's shape). Prints a table, writes JSON (--json).

  PYTHONPATH=python KTUNE_LIBRARY=build/lib/libktune.so python3 bench/bench_dispatch.py [--calls 300] [--json F]
"""
import argparse
import ctypes
import json
import statistics
import time

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

import ktune
import ktune.torch_ops  # registers torch.ops.ktune.*
from ktune import _lib
from ktune.ops import XqaDecodeOp

B, L, HQ, HKV, D, PAGE = 1, 512, 32, 8, 128, 32


_EMPTY_PTX = b""".version 8.0
.target sm_90
.address_size 64
.visible .entry ktune_empty() { ret; }
"""


def bare_launcher():
    """A ctypes call of libcuda's cuLaunchKernel on an empty kernel: the least a Python caller pays per launch."""
    cu = ctypes.CDLL("libcuda.so.1")
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    assert cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(_EMPTY_PTX)) == 0
    assert cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"ktune_empty") == 0
    launch = cu.cuLaunchKernel
    launch.argtypes = [ctypes.c_void_p] + [ctypes.c_uint] * 7 + [ctypes.c_void_p] * 3
    raw_stream = torch._C._cuda_getCurrentRawStream
    return lambda: launch(fn, 1, 1, 1, 32, 1, 1, 0, raw_stream(0), None, None)


def host_us(fn, calls):
    """Host microseconds per call of fn over `calls` calls, enqueued behind a GPU sleep so no call waits."""
    torch.cuda.synchronize()
    torch.cuda._sleep(80_000_000)  # ~40 ms of GPU time: every call below is only enqueued
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    us = (time.perf_counter() - t0) * 1e6 / calls
    torch.cuda.synchronize()
    return us


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=300)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--json")
    args = ap.parse_args()
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    key = ktune.xqa_problem(head_dim=D, num_q_heads=HQ, num_kv_heads=HKV, page_size=PAGE, mask="none")
    pages = L // PAGE
    q = torch.randn(B, HQ, D, device=dev, dtype=torch.bfloat16)
    kv = torch.randn(pages, 2, HKV, PAGE, D, device=dev, dtype=torch.bfloat16)
    bt = torch.arange(pages, device=dev, dtype=torch.int32).reshape(B, pages)
    sl = torch.full((B,), L, device=dev, dtype=torch.int32)
    out = torch.empty(B, HQ, D, device=dev, dtype=torch.bfloat16)

    op = XqaDecodeOp(key)
    op(q, kv, bt, sl, max_seq_len=L, out=out)
    torch.cuda.synchronize()
    ref = out.clone()
    ws = torch.empty(1 << 20, dtype=torch.uint8, device=dev)

    # The floor: ktune_op_run through ctypes on a struct filled once (what any Python caller pays at least).
    raw = _lib._XqaArgs()
    ctypes.memmove(ctypes.byref(raw), ctypes.byref(op._args), ctypes.sizeof(raw))
    raw.workspace, raw.workspace_bytes = ws.data_ptr(), ws.numel()
    raw_ref, run, handle = ctypes.byref(raw), _lib.lib().ktune_op_run, op._op._handle
    raw_stream = torch._C._cuda_getCurrentRawStream

    kc = torch.randn(B, HKV, L, D, device=dev, dtype=torch.bfloat16)
    vc = torch.randn(B, HKV, L, D, device=dev, dtype=torch.bfloat16)
    qs = q.reshape(B, HQ, 1, D)

    def sdpa():
        return F.scaled_dot_product_attention(qs, kc, vc, enable_gqa=True)

    bare = bare_launcher()
    ways = [
        ("ctypes cuLaunchKernel, empty kernel x2", lambda: (bare(), bare())),
        ("ctypes ktune_op_run (floor)", lambda: run(handle, raw_ref, raw_stream(0))),
        ("ktune.ops.XqaDecodeOp", lambda: op(q, kv, bt, sl, max_seq_len=L, out=out, workspace=ws)),
        ("XqaDecodeOp, workspace from torch", lambda: op(q, kv, bt, sl, max_seq_len=L, out=out)),
        ("torch.ops.ktune.xqa_decode_out", lambda: torch.ops.ktune.xqa_decode_out(
            q, kv, bt, sl, None, None, None, out, None, key, L, -1.0, 1.0, 1.0, 1.0, 1.0, 0.0, -1, 0, "",
            None, None, None, None, None, None)),
        ("ktune.xqa_decode (allocates out)", lambda: ktune.xqa_decode(key, q, kv, bt, sl, max_seq_len=L)),
        ("torch SDPA cuDNN (contiguous K/V)", sdpa),
    ]
    # Every repetition measures every (stream, way) once, in the same order, so a change of the host's speed
    # during the run (other processes, clocks) moves all rows alike instead of the rows measured at that time.
    side = torch.cuda.Stream(dev)
    streams = (("default", torch.cuda.default_stream(dev)), ("side", side))
    samples = {(sn, name): [] for sn, _ in streams for name, _ in ways}
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        for sn, st in streams:
            with torch.cuda.stream(st):
                for _, fn in ways:
                    fn()  # first calls (plans, allocations) outside the timing
        for _ in range(args.reps):
            for sn, st in streams:
                with torch.cuda.stream(st):
                    for name, fn in ways:
                        samples[(sn, name)].append(host_us(fn, args.calls))
    torch.cuda.synchronize()
    rows = [{"way": name, "stream": sn, "host_us": statistics.median(v), "min_us": min(v), "samples_us": v}
            for (sn, name), v in samples.items()]
    same = bool(torch.equal(out, ref))
    print(f"xqa_decode {key} B{B} L{L}; plan {op._op.plan(op._ref)}; outputs identical across ways: {same}")
    print("\n| way | default stream: host us per call, median (min) | side stream |\n|---|---|---|")
    for r in rows:
        if r["stream"] == "default":
            other = next(x for x in rows if x["way"] == r["way"] and x["stream"] == "side")
            print(f"| {r['way']} | {r['host_us']:.2f} ({r['min_us']:.2f}) | {other['host_us']:.2f} "
                  f"({other['min_us']:.2f}) |")
    print(f"calls per repetition {args.calls}, repetitions {args.reps} (median and min; every repetition measures "
          f"every row once, interleaved), torch {torch.__version__}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"key": key, "batch": B, "seq_len": L, "rows": rows, "identical": same}, f, indent=2)
    return 0 if same else 1


if __name__ == "__main__":
    raise SystemExit(main())
