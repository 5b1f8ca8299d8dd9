#!/usr/bin/env python3
"""Peers for bench_xqa: PyTorch SDPA (cuDNN and flash backends) on bench_xqa's decode shapes, plus the
device-to-device copy bandwidth, in one process. Writes JSON (--json) and prints a table.

SDPA has no paged form: K and V are contiguous [batch, kv_heads, seq_len, head_dim] BF16 tensors holding the
same number of KV bytes as ktune's paged cache. GQA: `enable_gqa=True` where the backend takes it; otherwise
K/V are expanded with repeat_interleave BEFORE timing (the row says "gqa": "repeat_interleave", and the
backend then reads group-times more bytes than the logical KV; TB/s is still logical KV bytes / time).
q_len > 1 uses a bottom-right causal mask (the last q_len keys are the draft tokens): a CausalBias
(causal_lower_right; flash takes no tensor mask) or a dense boolean mask (tried first for cuDNN); the row says
which ("mask") and lists the GPU kernels one call ran ("kernels", from the profiler), so a row labelled with a
backend shows what really executed. For q_len > 1 the same call is also timed with no mask at all
("nomask_kv_tbs"): not decode semantics, but the backend's cost floor, so the comparison is not won by a slow
mask path.
FP8 KV rows are not run: SDPA has no FP8 KV path.

Timing: CUDA events around each call, median of --reps calls after 5 warm-ups; inputs rotate over enough
copies to exceed 2x L2 (one copy already does for every shape here).
"""
import argparse
import json
import math
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

try:
    from torch.nn.attention.bias import causal_lower_right
except Exception:  # pragma: no cover
    causal_lower_right = None

ROWS = [  # label, batch, q_heads, kv_heads, head_dim, seq_len, q_len, kv dtype
    ("B64 L4096 bf16 q1", 64, 32, 8, 128, 4096, 1, "bf16"),
    ("B64 L4096 bf16 q2 causal", 64, 32, 8, 128, 4096, 2, "bf16"),
    ("B64 L4096 bf16 q4 causal", 64, 32, 8, 128, 4096, 4, "bf16"),
    ("B64 L4096 bf16 q8 causal", 64, 32, 8, 128, 4096, 8, "bf16"),
    ("B64 L4096 fp8 q1", 64, 32, 8, 128, 4096, 1, "fp8"),
    ("B64 L4096 fp8 q4 causal", 64, 32, 8, 128, 4096, 4, "fp8"),
    ("B1 L128K 64/8 bf16 q1", 1, 64, 8, 128, 131072, 1, "bf16"),
    ("B4 L128K 64/8 bf16 q1", 4, 64, 8, 128, 131072, 1, "bf16"),
]
BACKENDS = [("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)]


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


def kernels_of(fn):
    """Names of the GPU kernels one call runs (which backend really ran), or [] if the profiler is unavailable."""
    try:
        from torch.profiler import ProfilerActivity, profile
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            fn()
            torch.cuda.synchronize()
        names = [e.key for e in prof.key_averages() if e.device_type.name == "CUDA"]
        return [n[:120] for n in names][:4]
    except Exception as e:  # pragma: no cover
        return [f"profiler unavailable: {str(e)[:80]}"]


def copy_tbs(nbytes, reps=20):
    a = torch.empty(nbytes, dtype=torch.uint8, device="cuda").fill_(7)
    b = torch.empty_like(a)
    med, _ = time_calls(lambda: b.copy_(a), reps)
    return 2.0 * nbytes / (med * 1e-6) / 1e12


def run_row(row, backend_name, backend, reps, l2_bytes):
    label, B, HQ, HKV, D, L, QL, kvt = row
    out = {"label": label, "backend": backend_name, "batch": B, "q_heads": HQ, "kv_heads": HKV, "head_dim": D,
           "seq_len": L, "q_len": QL}
    if kvt == "fp8":
        out["error"] = "no FP8-KV SDPA path"
        return out
    group = HQ // HKV
    kv_bytes = 2.0 * B * HKV * L * D * 2
    out["kv_bytes"] = kv_bytes
    copies = max(1, min(8, int(2 * l2_bytes / kv_bytes) + 1))
    gen = torch.Generator(device="cuda").manual_seed(1234)
    sets = []
    for _ in range(copies):
        q = torch.randn(B, HQ, QL, D, device="cuda", dtype=torch.bfloat16, generator=gen)
        k = torch.randn(B, HKV, L, D, device="cuda", dtype=torch.bfloat16, generator=gen)
        v = torch.randn(B, HKV, L, D, device="cuda", dtype=torch.bfloat16, generator=gen)
        sets.append((q, k, v))
    scale = 1.0 / math.sqrt(D)

    masks = [("none", None)]
    if QL > 1:
        dense = ("dense_bool_mask", torch.ones(QL, L, dtype=torch.bool, device="cuda").tril(diagonal=L - QL))
        bias = [("causal_lower_right", causal_lower_right(QL, L))] if causal_lower_right is not None else []
        # cuDNN takes a dense mask; flash takes no tensor mask, only the CausalBias
        masks = [dense] + bias if backend_name == "cudnn" else bias + [dense]

    errors = []
    for gqa in ("enable_gqa", "repeat_interleave"):
        for mask_name, mask in masks:
            if gqa == "enable_gqa":
                args = [(q, k, v) for q, k, v in sets]
            else:
                args = [(q, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1)) for q, k, v in sets]
            state = {"i": 0}

            def call():
                q, k, v = args[state["i"] % len(args)]
                state["i"] += 1
                with sdpa_kernel([backend]):
                    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                                          enable_gqa=(gqa == "enable_gqa"))

            try:
                call()
                torch.cuda.synchronize()
                med, mn = time_calls(call, reps)
            except Exception as e:  # backend refused this combination: try the next
                errors.append(f"{gqa}/{mask_name}: {str(e).splitlines()[0][:160]}")
                del args
                torch.cuda.empty_cache()
                continue
            out.update({"gqa": gqa, "mask": mask_name, "median_us": med, "min_us": mn,
                        "kv_tbs": kv_bytes / (med * 1e-6) / 1e12, "copies": copies,
                        "kernels": kernels_of(call)})
            if QL > 1:  # the same call without any mask: not decode semantics, the backend's cost floor
                try:
                    mask = None
                    nm, _ = time_calls(call, reps)
                    out.update({"nomask_median_us": nm, "nomask_kv_tbs": kv_bytes / (nm * 1e-6) / 1e12,
                                "nomask_kernels": kernels_of(call)})
                except Exception as e:
                    out["nomask_error"] = str(e).splitlines()[0][:160]
            if errors:
                out["refused"] = errors
            del args
            torch.cuda.empty_cache()
            return out
    out["error"] = "; ".join(errors)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default="")
    ap.add_argument("--reps", type=int, default=50)
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    prop = torch.cuda.get_device_properties(0)
    l2 = getattr(prop, "L2_cache_size", 50 << 20)
    res = {"device": prop.name, "torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version(), "l2_bytes": l2}
    res["copy_tbs"] = copy_tbs(1 << 30)
    print(f"device {prop.name}, torch {torch.__version__}, cuDNN {res['cudnn']}; "
          f"copy (1 GiB D2D, read+write) {res['copy_tbs']:.2f} TB/s", flush=True)
    rows = []
    res["rows"] = rows
    for row in ROWS:
        for name, backend in BACKENDS:
            try:
                r = run_row(row, name, backend, a.reps, l2)
            except Exception as e:  # e.g. out of memory: report it, keep going
                r = {"label": row[0], "backend": name, "error": str(e).splitlines()[0][:200]}
                torch.cuda.empty_cache()
            rows.append(r)
            if "kv_tbs" in r:
                print(f"  {r['label']:<26} {name:<6} {r['gqa']:<17} {r['mask']:<19} {r['median_us']:9.1f} us "
                      f"{r['kv_tbs']:6.3f} TB/s  {(r['kernels'] or ['?'])[-1][:60]}", flush=True)
                if "nomask_kv_tbs" in r:
                    print(f"  {r['label']:<26} {name:<6} {r['gqa']:<17} {'none (cost floor)':<19} "
                          f"{r['nomask_median_us']:9.1f} us {r['nomask_kv_tbs']:6.3f} TB/s  "
                          f"{(r['nomask_kernels'] or ['?'])[-1][:60]}", flush=True)
            else:
                print(f"  {r['label']:<26} {name:<6} n/a: {r.get('error', '')[:200]}", flush=True)
            if a.json:  # after every row, so a cut-short run still leaves its results
                with open(a.json, "w") as f:
                    json.dump(res, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
