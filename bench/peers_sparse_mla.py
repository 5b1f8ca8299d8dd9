#!/usr/bin/env python3
"""Peers for bench_sparse_mla, in one process on the same device: a PyTorch gather + bmm sparse MLA decode on
bench_sparse_mla's shapes, the dense BF16 matmul rate (torch.mm 8192^3) and the copy bandwidth. Writes JSON (--json)
and prints a table.

The peer (absorbed MLA, one latent KV head): for each token, gather its topk cache rows by slot index, then
S = Q K^T (bmm over [tokens, heads, 576] x [tokens, 576, topk]), masked softmax in fp32, O = P V (bmm with the
512-wide latent part). Two cache forms:
  bf16  : the cache is BF16 [slots, 576]; gather + bmm (the BRIEF's 108 TFLOP/s figure is this form);
  fp8ds : the cache is fp8_ds_mla bytes [slots, 656]; gather the bytes, dequantize (e4m3 -> fp32 x per-128
          scale -> bf16, rope bf16) in PyTorch, then the same bmm path.
FLOPs are counted as 2 * tokens * heads * topk * (576 + 512) for every row, as for ktune.
Timing: CUDA events around each call, median of --reps calls after 5 warm-ups.
"""
import argparse
import json
import sys

import torch

ROWS = [  # label, heads, topk, tokens, cache form
    ("h128 k2048 T64 fp8", 128, 2048, 64, "fp8ds"),
    ("h128 k2048 T128 fp8", 128, 2048, 128, "fp8ds"),
    ("h128 k2048 T64 bf16", 128, 2048, 64, "bf16"),
    ("h128 k2048 T8 fp8", 128, 2048, 8, "fp8ds"),
    ("h64 k2048 T64 fp8", 64, 2048, 64, "fp8ds"),
    ("h16 k2048 T64 fp8", 16, 2048, 64, "fp8ds"),
    ("h16 k2048 T128 fp8", 16, 2048, 128, "fp8ds"),
]
LAT, ROPE = 512, 64
DIM = LAT + ROPE
ROW_BYTES = {"bf16": 2 * DIM, "fp8ds": LAT + 4 * (LAT // 128) + 2 * ROPE}


def time_calls(fn, reps):
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for i in range(reps):
        starts[i].record()
        fn()
        ends[i].record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return t[len(t) // 2] * 1e3, t[0] * 1e3  # median us, min us


def make_fp8ds_cache(slots, dev):
    amp = (torch.rand(slots, LAT // 128, 1, device=dev) * 2 + 0.25).expand(-1, -1, 128).reshape(slots, LAT)
    lat = torch.randn(slots, LAT, device=dev) * amp
    tiles = lat.view(slots, LAT // 128, 128)
    scale = tiles.abs().amax(-1) / 448.0  # [slots, 4]
    q8 = (tiles / scale.unsqueeze(-1)).to(torch.float8_e4m3fn).view(slots, LAT)
    rope = torch.randn(slots, ROPE, device=dev).to(torch.bfloat16)
    return torch.cat([q8.view(torch.uint8), scale.contiguous().view(torch.uint8), rope.view(torch.uint8)], dim=1).contiguous()


def dequant_rows(rows):  # [..., 656] uint8 -> [..., 576] bf16
    lat8 = rows[..., :LAT].contiguous().view(torch.float8_e4m3fn).to(torch.float32)
    scale = rows[..., LAT:LAT + 16].contiguous().view(torch.float32)
    lat = (lat8.view(*lat8.shape[:-1], LAT // 128, 128) * scale.unsqueeze(-1)).view(*lat8.shape[:-1], LAT)
    rope = rows[..., LAT + 16:].contiguous().view(torch.bfloat16)
    return torch.cat([lat.to(torch.bfloat16), rope], dim=-1)


def peer_call(q, cache, idx, form, scale):
    valid = idx >= 0
    rows = cache[idx.clamp(min=0)]  # [T, topk, row]
    kv = dequant_rows(rows) if form == "fp8ds" else rows  # [T, topk, 576] bf16
    s = torch.bmm(q, kv.transpose(1, 2)).float() * scale  # [T, H, topk]
    s = s.masked_fill(~valid.unsqueeze(1), float("-inf"))
    p = torch.softmax(s, dim=-1).to(torch.bfloat16)
    return torch.bmm(p, kv[..., :LAT])  # [T, H, 512]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default="")
    ap.add_argument("--reps", type=int, default=30)
    a = ap.parse_args()
    dev = torch.device("cuda")
    torch.manual_seed(0)
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": []}
    # copy bandwidth (read + write)
    n = 1 << 30
    src = torch.empty(n, dtype=torch.uint8, device=dev).fill_(3)
    dst = torch.empty_like(src)
    us, _ = time_calls(lambda: dst.copy_(src), 10)
    out["copy_tbs"] = 2 * n / (us * 1e-6) / 1e12
    del src, dst
    # dense bf16 matmul rate
    m = 8192
    x = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    y = torch.randn(m, m, device=dev, dtype=torch.bfloat16)
    us, _ = time_calls(lambda: torch.mm(x, y), 10)
    out["dense_bf16_tflops"] = 2 * m ** 3 / (us * 1e-6) / 1e12
    del x, y
    print(f"device {out['device']}, torch {out['torch']}: copy {out['copy_tbs']:.2f} TB/s, "
          f"dense bf16 mm 8192^3 {out['dense_bf16_tflops']:.0f} TFLOP/s")
    for label, heads, topk, tokens, form in ROWS:
        slots = max(4 * topk * tokens, 65536)
        if form == "fp8ds":
            cache = make_fp8ds_cache(slots, dev)
        else:
            cache = torch.randn(slots, DIM, device=dev).to(torch.bfloat16)
        q = torch.randn(tokens, heads, DIM, device=dev).to(torch.bfloat16)
        idx = torch.stack([torch.randperm(slots, device=dev)[:topk] for _ in range(tokens)]).to(torch.int64)
        scale = DIM ** -0.5
        us, us_min = time_calls(lambda: peer_call(q, cache, idx, form, scale), a.reps)
        flops = 2.0 * tokens * heads * topk * (DIM + LAT)
        kvb = float(tokens) * topk * ROW_BYTES[form]
        r = {"label": label, "heads": heads, "topk": topk, "tokens": tokens, "cache": form, "median_us": us,
             "min_us": us_min, "tflops": flops / (us * 1e-6) / 1e12, "kv_tbs": kvb / (us * 1e-6) / 1e12}
        out["rows"].append(r)
        print(f"  {label:<22} torch gather+bmm ({form}) {us:9.1f} us {r['tflops']:7.1f} TFLOP/s {r['kv_tbs']:.3f} TB/s KV")
        sys.stdout.flush()
        del cache, q, idx
        torch.cuda.empty_cache()
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
