#!/usr/bin/env python3
"""The tables of bench/run_h200.sh: each family's bench against its peers, from the JSON files under OUT.

    python3 bench/h200_summary.py OUT      prints markdown for every bench whose JSON is present
"""
import json
import os
import re
import sys


def load(out, name):
    try:
        with open(os.path.join(out, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def pick(rows, config):
    return next(x for x in rows if x["config"] == config)


def xqa(out):
    bx, pe, br = load(out, "xqa_bench.json"), load(out, "xqa_peers.json") or {}, load(out, "runtime_bench.json")
    if not bx:
        return
    print(f"## xqa_decode on {bx.get('device', '?')} ({bx.get('arch', '?')}), NVRTC {bx.get('nvrtc', '?')}")
    print(f"copy bandwidth (read+write): ktune cuMemcpyDtoD {bx.get('copy_tbs', float('nan')):.2f} TB/s, "
          f"torch copy_ {pe.get('copy_tbs', float('nan')):.2f} TB/s\n")
    peer = {(r["label"], r["backend"]): r for r in pe.get("rows", []) if "kv_tbs" in r}
    print("| shape | ktune launch choice | TB/s | ktune best | TB/s | cuDNN TB/s | flash TB/s | bar | vs best peer |")
    print("|---|---|---|---|---|---|---|---|---|")

    def fmt(p):
        if not p:
            return "n/a"
        s = f"{p['kv_tbs']:.2f}" + ("*" if p.get("gqa") == "repeat_interleave" else "")
        return s + (f" ({p['nomask_kv_tbs']:.2f} no mask)" if "nomask_kv_tbs" in p else "")

    for r in bx.get("rows", []):
        c, b = pick(r["candidates"], r["launch_choice"]), pick(r["candidates"], r["best_config"])
        cu, fl = peer.get((r["label"], "cudnn")), peer.get((r["label"], "flash"))
        best_peer = max([max(p["kv_tbs"], p.get("nomask_kv_tbs", 0)) for p in (cu, fl) if p] or [0])
        vs = f"{b['kv_tbs'] / best_peer:.2f}x" if best_peer else "-"
        bar = f"{r['bar_tbs']:.1f}" if r["bar_tbs"] else "-"
        print(f"| {r['label']} | {c['config']} s{c['splits']} | {c['kv_tbs']:.2f} | {b['config']} s{b['splits']} | "
              f"{b['kv_tbs']:.2f} | {fmt(cu)} | {fmt(fl)} | {bar} | {vs} |")
    print("(* = the peer ran with K/V expanded by repeat_interleave: it read group-times more bytes)")
    st = bx.get("stats", {})
    print(f"\nbench_xqa runtime stats: compiles {st.get('compiles')}, loads {st.get('loads')}, "
          f"cache_hits {st.get('cache_hits')}, memory_hits {st.get('memory_hits')}")
    if br:
        print(f"bench_runtime: load 100 cached kernels {br.get('load_ms_median', 0):.2f} ms "
              f"(compiles {br.get('compiles')}), ktune launch {br.get('ktune_launch_us', 0):.3f} us vs bare "
              f"cuLaunchKernel {br.get('bare_launch_us', 0):.3f} us")
    print()


def mla(out):
    b, pe = load(out, "mla_bench.json"), load(out, "mla_peers.json") or {}
    if not b:
        return
    print(f"## sparse_mla_decode on {b.get('device', '?')} ({b.get('arch', '?')}), NVRTC {b.get('nvrtc', '?')}, "
          f"torch {pe.get('torch', '?')}")
    print(f"copy (read+write): cuMemcpyDtoD {b.get('copy_tbs', float('nan')):.2f} TB/s, torch copy_ "
          f"{pe.get('copy_tbs', float('nan')):.2f} TB/s; dense bf16 torch.mm 8192^3: "
          f"{pe.get('dense_bf16_tflops', float('nan')):.0f} TFLOP/s\n")
    peer = {r["label"]: r for r in pe.get("rows", [])}
    print("| shape | ktune launch choice | TFLOP/s | KV TB/s | ktune best | TFLOP/s | KV TB/s | "
          "torch gather+bmm TFLOP/s | bar |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in b.get("rows", []):
        c, bb = pick(r["candidates"], r["launch_choice"]), pick(r["candidates"], r["best_config"])
        p = peer.get(r["label"])
        ps = f"{p['tflops']:.1f}" if p else "n/a"
        bar = f"{r['bar_tflops']:.0f}" if r["bar_tflops"] else "-"
        print(f"| {r['label']} | {c['config']} s{c['splits']} | {c['tflops']:.1f} | {c['kv_tbs']:.2f} | "
              f"{bb['config']} s{bb['splits']} | {bb['tflops']:.1f} | {bb['kv_tbs']:.2f} | {ps} | {bar} |")
    print(f"\nbench_sparse_mla runtime stats: compiles {b.get('compiles')}, loads {b.get('loads')}\n")


def mxfp4(out):
    b, p = load(out, "mxfp4_bench.json"), load(out, "mxfp4_peers.json") or {}
    if not b:
        return
    print(f"## mxfp4_gemm: copy driver {b.get('copy_tbs', 0):.2f} TB/s, torch {p.get('copy_tbs', 0):.2f} TB/s; "
          f"compiles in the bench run: {b.get('compiles')}\n")
    print("| shape | ktune (best) us | TB/s | TFLOP/s | config | cuBLAS bf16 us | TB/s | TFLOP/s | speedup | "
          "ktune b2b us | TB/s | config | cuBLAS b2b us | TB/s | speedup |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    peer = {r["label"]: r for r in p.get("rows", [])}

    def peer_for(label):
        if "dense" in label:
            return peer.get(f"cuBLAS bf16 dense 8192x8192 M={label.split('M=')[1]}")
        shape = "gate_up 5760x2880" if "gate_up" in label else "down 2880x2880"
        tokens = "8" if " 8 tok" in label else "128"
        return peer.get(f"cuBLAS bf16 bmm moe {shape} E128 {tokens} tok/exp")

    for r in b.get("rows", []):
        q = peer_for(r["label"]) or {}
        sp = q.get("us", 0) / r["best_us"] if r.get("best_us") else 0
        sb = q.get("b2b_us", 0) / r["best_b2b_us"] if r.get("best_b2b_us") else 0
        print(f"| {r['label']} | {r['best_us']:.1f} | {r['best_tbs']:.2f} | {r['best_tflops']:.1f} | "
              f"{r['best_config']} | {q.get('us', 0):.1f} | {q.get('tbs', 0):.2f} | {q.get('tflops', 0):.1f} | "
              f"{sp:.2f}x | {r.get('best_b2b_us', 0):.1f} | {r.get('best_b2b_tbs', 0):.2f} | "
              f"{r.get('best_b2b_config', '')} | {q.get('b2b_us', 0):.1f} | {q.get('b2b_tbs', 0):.2f} | {sb:.2f}x |")
    print()


def tests(out):
    path = os.path.join(out, "tests_gpu.txt")
    if not os.path.exists(path):
        return
    with open(path, errors="replace") as f:
        text = f.read()
    for pat in (r".*GPU MATRIX:.*", r"test cases:.*", r"assertions:.*", r"All tests passed.*"):
        for m in re.findall(pat, text):
            print("tests:", m.strip())


if __name__ == "__main__":
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "/tmp/ktune-h200"
    for f in (xqa, mla, mxfp4, tests):
        f(out_dir)
