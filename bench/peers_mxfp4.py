#!/usr/bin/env python3
"""Peers for bench_mxfp4, on the same GPU in the same run: cuBLAS BF16 through PyTorch on the
dequantized weight (a BF16 [N, K] matrix of the same shape, random), and device copy bandwidth.

Rows: dense N=K=8192 at M = 1, 16, 64, 128, 256, 4096 (torch.matmul(A, W.T)); grouped GPT-OSS-120B MoE shapes (gate_up
5760x2880, down 2880x2880, 128 experts) at 8, 32, 64 and 128 tokens per expert: torch.bmm over the experts with equal
rows per expert, and torch._grouped_mm (PyTorch's ragged grouped BF16 GEMM) with the rows routed uniformly at random
as bench_mxfp4 routes them (a multinomial draw: uneven counts). Bytes = BF16 weight + activations + output.
Timing: CUDA events around each call, median of --reps, after warm-up; inputs are N(0,1), never zeros. Also
back-to-back: 20 calls between one event pair (launch gaps hidden, as in an engine's decode step), per call.
"""
import argparse
import json
import torch


def timed(fn, reps):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    ts = []
    for _ in range(reps):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def timed_b2b(fn, reps, batch=20):
    ts = []
    for _ in range(max(3, reps // 4)):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(batch):
            fn()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e) * 1e3 / batch)
    ts.sort()
    return ts[len(ts) // 2]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    out = {"device": torch.cuda.get_device_name(), "torch": torch.__version__, "rows": []}
    n = 1 << 30
    x = torch.empty(n, dtype=torch.uint8, device=dev).random_()
    y = torch.empty_like(x)
    us = timed(lambda: y.copy_(x), 10)
    out["copy_tbs"] = 2 * n / (us * 1e-6) / 1e12
    del x, y
    print(f"copy (torch copy_ 1 GiB, read+write): {out['copy_tbs']:.2f} TB/s", flush=True)

    def row(label, us, wbytes, abytes, cbytes, flops, b2b_us):
        r = {"label": label, "us": us, "tbs": (wbytes + abytes + cbytes) / (us * 1e-6) / 1e12,
             "weight_tbs": wbytes / (us * 1e-6) / 1e12, "tflops": flops / (us * 1e-6) / 1e12,
             "b2b_us": b2b_us, "b2b_tbs": (wbytes + abytes + cbytes) / (b2b_us * 1e-6) / 1e12,
             "b2b_tflops": flops / (b2b_us * 1e-6) / 1e12}
        out["rows"].append(r)
        print(f"  {label:<44} {us:9.1f} us {r['tbs']:6.3f} TB/s (weight {r['weight_tbs']:.3f}) {r['tflops']:7.1f} TFLOP/s"
              f" | back-to-back {b2b_us:9.1f} us {r['b2b_tbs']:6.3f} TB/s {r['b2b_tflops']:7.1f} TFLOP/s", flush=True)

    N = K = 8192
    W = torch.randn(N, K, device=dev, dtype=torch.bfloat16)
    for M in (1, 16, 64, 128, 256, 4096):
        A = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
        f = lambda: torch.matmul(A, W.t())
        us = timed(f, a.reps)
        row(f"cuBLAS bf16 dense 8192x8192 M={M}", us, N * K * 2, M * K * 2, M * N * 2, 2.0 * M * N * K,
            timed_b2b(f, a.reps))
    del W
    E = 128
    for (name, N, K) in (("gate_up 5760x2880", 5760, 2880), ("down 2880x2880", 2880, 2880)):
        Wt = torch.randn(E, K, N, device=dev, dtype=torch.bfloat16)
        for t in (8, 32, 64, 128):
            A = torch.randn(E, t, K, device=dev, dtype=torch.bfloat16)
            f = lambda: torch.bmm(A, Wt)
            us = timed(f, a.reps)
            row(f"cuBLAS bf16 bmm moe {name} E128 {t} tok/exp", us, E * N * K * 2, E * t * K * 2, E * t * N * 2,
                2.0 * E * t * N * K, timed_b2b(f, a.reps))
        # the same rows routed at random over the experts, one ragged grouped GEMM (offs: each expert's end row)
        Wg = Wt.transpose(1, 2).contiguous().transpose(1, 2)  # [E, K, N], column-major per expert
        for t in (32, 64, 128):
            counts = torch.bincount(torch.randint(0, E, (E * t,), device=dev), minlength=E)
            offs = torch.cumsum(counts, 0).to(torch.int32)
            A = torch.randn(E * t, K, device=dev, dtype=torch.bfloat16)
            f = lambda: torch._grouped_mm(A, Wg, offs=offs, out_dtype=torch.bfloat16)
            try:
                f()
            except (RuntimeError, AttributeError) as e:
                print(f"  torch._grouped_mm moe {name} {t} tok/exp: not available ({str(e).splitlines()[0]})")
                break
            us = timed(f, a.reps)
            row(f"torch._grouped_mm bf16 moe {name} E128 {t} tok/exp routed (max {int(counts.max())})", us,
                E * N * K * 2, E * t * K * 2, E * t * N * 2, 2.0 * E * t * N * K, timed_b2b(f, a.reps))
        del Wt, Wg
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
