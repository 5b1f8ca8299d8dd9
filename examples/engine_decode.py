"""An engine's decode step on ktune, wired the way vLLM-style engines wire their attention and MoE backends.

Three toy models, each captured once per CUDA-graph batch bucket and replayed step after step with new metadata,
every step checked against a PyTorch fp32 reference:

  xqa   GPT-OSS-style attention, 4 layers: BF16 Q over an FP8 (e4m3) KV cache held as a (k_cache, v_cache) pair
        per layer, per-layer scales as device tensors that change every step, attention sinks on every layer and a
        128-token sliding window on every other one; speculative decoding with per-request q_len 1..8 and
        EAGLE-style tree masks; a ragged bucket (q_cu_seq_lens built on the GPU) and a uniform one; CUDA-graph
        padding as zero-length requests. The metadata builder packs the step's bool tree masks on the GPU
        (ktune.DecodePlan.plan -> ktune.xqa_pack_mask, ktune.q_cu_seq_lens).
  mla   DeepSeek-V3.2-style sparse MLA decode: top-k over per-token index scores on the GPU, positions mapped to
        cache slots through the block table (-1 where a request has fewer tokens), fp8_ds_mla cache.
  moe   GPT-OSS-style MXFP4 MoE: router -> top-k experts -> rows sorted by expert -> expert_offsets on the GPU ->
        grouped gate_up GEMM -> SwiGLU -> grouped down GEMM -> weighted scatter back to the tokens.

No step synchronizes with the host: metadata reaches the GPU through pinned buffers and non-blocking copies, and
each step (metadata build + graph replay) runs under torch.cuda.set_sync_debug_mode("error").

  python3 examples/engine_decode.py [--steps 50] [--json OUT] [--parts xqa,mla,moe]

Prints one row per bucket: steps, the worst error against the reference, and the GPU time per step of the graph
replay and of the same step run eagerly. Exit status 1 when any step misses its tolerance.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time

import numpy as np
import torch

import ktune
from ktune.ops import XqaDecodeOp

DEV = "cuda"
FP8 = torch.float8_e4m3fn


def pinned(a, dtype=torch.int32):
    return torch.from_numpy(np.ascontiguousarray(a)).to(dtype).pin_memory()


def gpu_time_us(fn, reps):
    """GPU time per call of fn(), from CUDA events around `reps` calls."""
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    fn()
    start.record()
    for _ in range(reps):
        fn()
    stop.record()
    stop.synchronize()
    return 1000.0 * start.elapsed_time(stop) / reps


class NoSync:
    """torch.cuda.set_sync_debug_mode("error") for the block: any host synchronization raises."""

    def __enter__(self):
        torch.cuda.set_sync_debug_mode("error")

    def __exit__(self, *exc):
        torch.cuda.set_sync_debug_mode(0)
        return False


# ------------------------------------------------------------------------------------------------------------------
# xqa_decode: GPT-OSS-style attention layers with speculative decoding
# ------------------------------------------------------------------------------------------------------------------
def replay_steps(forward, next_inputs, error, steps, eager_reps):
    """The engine loop of one captured model: run `forward` once on the first inputs, capture it in a CUDA graph,
    then `steps` times take new inputs (`next_inputs()` does the host-side work and returns what to run on the
    GPU, which runs with the graph under NoSync) and check the step (`error()` -> relative L2 against the fp32
    reference). Returns (worst error, graph replay us per step, eager us per step)."""
    next_inputs()()
    torch.cuda.synchronize()
    forward()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        forward()
    worst = 0.0
    for _ in range(steps):
        put = next_inputs()
        with NoSync():
            put()
            graph.replay()
        torch.cuda.synchronize()
        worst = max(worst, error())
    return worst, gpu_time_us(graph.replay, eager_reps), gpu_time_us(forward, eager_reps)


class XqaModel:
    LAYERS, HQ, HKV, D, PAGE, HIDDEN, MAX_Q, WINDOW = 4, 16, 2, 64, 16, 512, 8, 128
    MAX_SEQ = 3000

    def __init__(self, rng):
        g = torch.Generator(device=DEV).manual_seed(int(rng.integers(1 << 31)))
        # one op per layer type: the windowed layers' problem has the sliding-window flag, the full ones' not
        self.ops = {win: XqaDecodeOp(ktune.xqa_problem(
            head_dim=self.D, num_q_heads=self.HQ, num_kv_heads=self.HKV, page_size=self.PAGE, layout="hnd",
            q_dtype=torch.bfloat16, kv_dtype=FP8, out_dtype=torch.bfloat16, max_q_len=self.MAX_Q, mask="explicit",
            sinks=True, sliding_window=win)) for win in (True, False)}
        self.max_pages = -(-self.MAX_SEQ // self.PAGE)
        self.num_pages = 8 * self.max_pages + 16
        # vLLM's layout: one [2, num_pages, ...] tensor per layer, K and V its two halves (a (k_cache, v_cache) pair)
        self.kv = [(torch.randn(2, self.num_pages, self.HKV, self.PAGE, self.D, device=DEV, generator=g) * 2).to(FP8)
                   for _ in range(self.LAYERS)]
        self.sinks = [torch.randn(self.HQ, device=DEV, generator=g) for _ in range(self.LAYERS)]
        self.k_scale = [torch.ones(1, device=DEV) for _ in range(self.LAYERS)]
        self.v_scale = [torch.ones(1, device=DEV) for _ in range(self.LAYERS)]
        self.wq = [(torch.randn(self.HIDDEN, self.HQ * self.D, device=DEV, generator=g) / math.sqrt(self.HIDDEN))
                   .to(torch.bfloat16) for _ in range(self.LAYERS)]
        self.wo = [(torch.randn(self.HQ * self.D, self.HIDDEN, device=DEV, generator=g) / math.sqrt(self.HQ * self.D))
                   .to(torch.bfloat16) for _ in range(self.LAYERS)]
        self.scale = 1.0 / math.sqrt(self.D)

    def windowed(self, layer):
        return layer % 2 == 0

    def window(self, layer):
        return self.WINDOW if self.windowed(layer) else -1


class XqaBucket:
    """One CUDA-graph bucket: a DecodePlan per layer type (the metadata buffers at fixed addresses) plus the
    model's static activations (the step's hidden states in, every layer's q and attention output kept for the
    check)."""

    def __init__(self, model, batch, q_len):
        self.m, self.batch, self.q_len = model, batch, q_len  # q_len None: the ragged form
        self.plans = {win: ktune.DecodePlan(op, batch=batch, max_seq_len=model.MAX_SEQ,
                                            max_pages_per_req=model.max_pages, q_len=q_len)
                      for win, op in model.ops.items()}
        self.rows = self.plans[True].num_tokens
        self.x = torch.zeros(self.rows, model.HIDDEN, dtype=torch.bfloat16, device=DEV)
        self.q = [torch.zeros(self.rows, model.HQ, model.D, dtype=torch.bfloat16, device=DEV)
                  for _ in range(model.LAYERS)]
        self.o = [torch.zeros_like(t) for t in self.q]
        self.graph = None

    def forward(self):
        """The captured part of the step: every layer's projection, attention and residual."""
        m, x = self.m, self.x
        for layer in range(m.LAYERS):
            self.q[layer].copy_((x @ m.wq[layer]).view(self.rows, m.HQ, m.D))
            k_cache, v_cache = m.kv[layer][0], m.kv[layer][1]
            plan = self.plans[m.windowed(layer)]
            out = plan.run(self.q[layer], (k_cache, v_cache), sinks=m.sinks[layer], softmax_scale=m.scale,
                           k_scale=m.k_scale[layer], v_scale=m.v_scale[layer], window_left=m.window(layer))
            self.o[layer].copy_(out)
            x = x + self.o[layer].view(self.rows, m.HQ * m.D) @ m.wo[layer]

    def capture(self):
        torch.cuda.synchronize()
        self.forward()  # loads the modules and plans outside the capture
        torch.cuda.synchronize()
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self.forward()


def random_tree_mask(rng, n):
    """An EAGLE-style draft tree of n tokens: token i's parent is an earlier token; i sees its ancestors and
    itself."""
    parent = [-1] + [int(rng.integers(0, i)) for i in range(1, n)]
    mask = np.zeros((n, n), dtype=bool)
    for i in range(n):
        j = i
        while j >= 0:
            mask[i, j] = True
            j = parent[j]
    return mask


class XqaStep:
    """The scheduler's view of one step (host values, as an engine's scheduler holds them) and its metadata."""

    def __init__(self, rng, model, bucket):
        b = bucket
        self.n = int(rng.integers(max(1, b.batch - 3), b.batch + 1))  # live requests; the rest is padding
        if b.q_len is None:
            self.q_lens = rng.integers(1, model.MAX_Q + 1, size=self.n).astype(np.int32)
        else:
            self.q_lens = np.full(self.n, b.q_len, dtype=np.int32)
        self.seq_lens = np.array([int(rng.integers(int(q), model.MAX_SEQ + 1)) for q in self.q_lens], np.int32)
        self.seq_lens[0] = max(int(self.q_lens[0]), int(rng.integers(1, 40)))  # one request shorter than the window
        pages = rng.permutation(model.num_pages)[: self.n * model.max_pages].reshape(self.n, model.max_pages)
        self.block_tables = pages.astype(np.int32)
        width = model.MAX_Q if b.q_len is None else b.q_len
        masks = [random_tree_mask(rng, int(q)) for q in self.q_lens]
        rows = np.zeros((int(self.q_lens.sum()), width), dtype=bool)
        t = 0
        for mk in masks:
            rows[t:t + mk.shape[0], :mk.shape[1]] = mk
            t += mk.shape[0]
        self.masks, self.mask_rows = masks, rows
        self.k_scales = rng.uniform(0.5, 2.0, size=model.LAYERS).astype(np.float32)
        self.v_scales = rng.uniform(0.5, 2.0, size=model.LAYERS).astype(np.float32)
        # pinned host copies: the builder's non-blocking copies need no host sync
        self.h_seq_lens, self.h_q_lens = pinned(self.seq_lens), pinned(self.q_lens)
        self.h_block_tables, self.h_mask = pinned(self.block_tables), pinned(self.mask_rows, torch.bool)
        self.h_scales = pinned(np.concatenate([self.k_scales, self.v_scales]), torch.float32)
        self.seed = int(rng.integers(1 << 31))

    def build(self, model, bucket):
        """The metadata builder, all on the current stream with no host sync: inputs to the GPU, the plan's
        buffers filled (q_cu_seq_lens and the mask words computed there), new scales, the step's hidden states."""
        seq_lens = self.h_seq_lens.to(DEV, non_blocking=True)
        block_tables = self.h_block_tables.to(DEV, non_blocking=True)
        mask = self.h_mask.to(DEV, non_blocking=True)
        q_lens = self.h_q_lens.to(DEV, non_blocking=True) if bucket.q_len is None else None
        for plan in bucket.plans.values():
            plan.plan(seq_lens, block_tables, q_lens=q_lens, mask=mask)
        scales = self.h_scales.to(DEV, non_blocking=True)
        for layer in range(model.LAYERS):
            model.k_scale[layer].copy_(scales[layer:layer + 1])
            model.v_scale[layer].copy_(scales[model.LAYERS + layer:model.LAYERS + layer + 1])
        g = torch.Generator(device=DEV).manual_seed(self.seed)
        bucket.x.copy_(torch.randn(bucket.rows, model.HIDDEN, device=DEV, generator=g))


def xqa_reference(model, bucket, step, layer):
    """fp32 attention of every live query row of one layer, from the q the kernel read: [(row, ref [HQ, D])]."""
    m = model
    k_all = m.kv[layer][0].float() * float(step.k_scales[layer])
    v_all = m.kv[layer][1].float() * float(step.v_scales[layer])
    group, wl = m.HQ // m.HKV, m.window(layer)
    out, t = [], 0
    for r in range(step.n):
        n, L = int(step.q_lens[r]), int(step.seq_lens[r])
        row0 = t if bucket.q_len is None else r * bucket.q_len
        t += n
        pages = torch.from_numpy(step.block_tables[r, : -(-L // m.PAGE)]).long().to(DEV)
        K = k_all[pages].permute(1, 0, 2, 3).reshape(m.HKV, -1, m.D)[:, :L]  # [HKV, L, D]
        V = v_all[pages].permute(1, 0, 2, 3).reshape(m.HKV, -1, m.D)[:, :L]
        K, V = K.repeat_interleave(group, 0), V.repeat_interleave(group, 0)  # [HQ, L, D]
        q = bucket.q[layer][row0:row0 + n].float().permute(1, 0, 2)  # [HQ, n, D]
        logits = q @ K.transpose(1, 2) * m.scale  # [HQ, n, L]
        keys = torch.arange(L, device=DEV)
        draft0 = L - n
        vis = torch.ones(n, L, dtype=torch.bool, device=DEV)
        tree = torch.from_numpy(step.masks[r]).to(DEV)
        vis[:, draft0:] = tree
        if wl >= 0:
            qi = torch.arange(n, device=DEV)[:, None]
            vis &= keys[None, :] >= draft0 + qi - wl
        logits = logits.masked_fill(~vis[None], float("-inf"))
        mx = torch.maximum(logits.amax(-1), m.sinks[layer][:, None])  # the sink joins the denominator
        p = torch.exp(logits - mx[..., None])
        denom = p.sum(-1) + torch.exp(m.sinks[layer][:, None] - mx)
        o = (p @ V) / denom[..., None]  # [HQ, n, D]
        out.append((row0, o.permute(1, 0, 2)))
    return out


def run_xqa(rng, steps, eager_reps):
    model = XqaModel(rng)
    rows = []
    for name, batch, q_len in (("xqa ragged B8 q1-8 (tree masks)", 8, None), ("xqa uniform B4 q4 (tree masks)", 4, 4)):
        bucket = XqaBucket(model, batch, q_len)
        XqaStep(rng, model, bucket).build(model, bucket)
        bucket.capture()
        worst = 0.0
        for s in range(steps):
            step = XqaStep(rng, model, bucket)
            with NoSync():
                step.build(model, bucket)
                bucket.graph.replay()
            torch.cuda.synchronize()
            for layer in range(model.LAYERS):
                for row0, ref in xqa_reference(model, bucket, step, layer):
                    got = bucket.o[layer][row0:row0 + ref.shape[0]].float()
                    err = ((got - ref).norm() / ref.norm().clamp_min(1e-6)).item()
                    worst = max(worst, err)
        replay_us = gpu_time_us(bucket.graph.replay, eager_reps)
        eager_us = gpu_time_us(bucket.forward, eager_reps)
        rows.append(dict(part=name, steps=steps, worst_rel_l2=worst, tolerance=1e-2, graph_us=replay_us,
                         eager_us=eager_us, ok=worst < 1e-2))
    return rows


# ------------------------------------------------------------------------------------------------------------------
# sparse_mla_decode: DeepSeek-V3.2-style decode with indices from a top-k
# ------------------------------------------------------------------------------------------------------------------
def fp8_ds_mla_cache(num_pages, page, rank, rope, g):
    """An fp8_ds_mla cache [num_pages, page, 656] (e4m3 latent in 128-value tiles, their fp32 scales, bf16 rope)
    and the fp32 rows it holds [slots, rank + rope]."""
    latent = torch.randn(num_pages, page, rank, device=DEV, generator=g)
    rope_v = torch.randn(num_pages, page, rope, device=DEV, generator=g).to(torch.bfloat16)
    tiles = latent.view(num_pages, page, rank // 128, 128)
    scale = (tiles.abs().amax(-1, keepdim=True) / 448.0).clamp_min(1e-6)
    codes = (tiles / scale).to(FP8)
    rows = torch.cat([(codes.float() * scale).view(num_pages, page, rank), rope_v.float()], -1).view(-1, rank + rope)
    kv = torch.empty(num_pages, page, rank + 4 * (rank // 128) + 2 * rope, dtype=torch.uint8, device=DEV)
    kv[..., :rank] = codes.view(torch.uint8).view(num_pages, page, rank)
    kv[..., rank:rank + 4 * (rank // 128)] = scale.squeeze(-1).contiguous().view(torch.uint8).view(num_pages, page, -1)
    kv[..., rank + 4 * (rank // 128):] = rope_v.view(torch.uint8).view(num_pages, page, 2 * rope)
    return kv, rows


def run_mla(rng, steps, eager_reps):
    H, RANK, ROPE, TOPK, PAGE, T, MAX_CTX = 64, 512, 64, 2048, 64, 16, 6000
    key = ktune.mla_problem(num_heads=H, kv_lora_rank=RANK, rope_dim=ROPE, topk=TOPK, page_size=PAGE,
                            kv_dtype="fp8_ds_mla")
    g = torch.Generator(device=DEV).manual_seed(int(rng.integers(1 << 31)))
    max_pages = -(-MAX_CTX // PAGE)
    num_pages = T * max_pages + 8
    kv, k_rows = fp8_ds_mla_cache(num_pages, PAGE, RANK, ROPE, g)
    scale = 1.0 / math.sqrt(RANK + ROPE)
    # static graph inputs: q, the indexer's scores, context lengths and block tables
    q = torch.zeros(T, H, RANK + ROPE, dtype=torch.bfloat16, device=DEV)
    scores = torch.zeros(T, MAX_CTX, device=DEV)
    ctx = torch.zeros(T, dtype=torch.int32, device=DEV)
    bt = torch.zeros(T, max_pages, dtype=torch.int32, device=DEV)
    pos = torch.arange(MAX_CTX, device=DEV)
    state = {}

    def forward():
        live = pos[None, :] < ctx[:, None]
        top = scores.masked_fill(~live, float("-inf")).topk(TOPK, dim=-1)
        p = top.indices
        slot = torch.gather(bt, 1, (p // PAGE).to(torch.int64)) * PAGE + (p % PAGE).to(torch.int32)
        state["idx"] = torch.where(torch.isfinite(top.values), slot, torch.full_like(slot, -1)).to(torch.int32)
        state["out"] = ktune.sparse_mla_decode(key, q, kv, state["idx"], softmax_scale=scale)

    def build():
        ctx_h = rng.integers(200, MAX_CTX + 1, size=T).astype(np.int32)
        pages = rng.permutation(num_pages)[: T * max_pages].reshape(T, max_pages).astype(np.int32)
        seed = int(rng.integers(1 << 31))
        h_ctx, h_bt = pinned(ctx_h), pinned(pages)
        gg = torch.Generator(device=DEV).manual_seed(seed)

        def on_gpu():
            ctx.copy_(h_ctx, non_blocking=True)
            bt.copy_(h_bt, non_blocking=True)
            q.copy_(torch.randn(T, H, RANK + ROPE, device=DEV, generator=gg))
            scores.copy_(torch.rand(T, MAX_CTX, device=DEV, generator=gg))
        return on_gpu

    def error():
        idx, out = state["idx"], state["out"]
        worst = 0.0
        for t in range(T):
            sel = idx[t][idx[t] >= 0].long()
            K = k_rows[sel]
            p = (q[t].float() @ K.T * scale).softmax(-1)
            ref = p @ K[:, :RANK]
            worst = max(worst, ((out[t].float() - ref).norm() / ref.norm()).item())
        return worst

    worst, replay_us, eager_us = replay_steps(forward, build, error, steps, eager_reps)
    return [dict(part=f"mla T{T} H{H} top-{TOPK} (indices from top-k)", steps=steps, worst_rel_l2=worst,
                 tolerance=1e-2, graph_us=replay_us, eager_us=eager_us, ok=worst < 1e-2)]


# ------------------------------------------------------------------------------------------------------------------
# mxfp4_gemm: GPT-OSS-style MoE with experts' rows sorted and offsets built on the GPU
# ------------------------------------------------------------------------------------------------------------------
def run_moe(rng, steps, eager_reps):
    import ktune.torch_ops as kt
    from ktune import mxfp4
    E, TOP, HID, INTER, T = 8, 2, 512, 256, 16
    M = T * TOP  # rows a step sends through the experts: fixed, so one graph fits every routing
    key_gu = ktune.mxfp4_problem(n=2 * INTER, k=HID, num_experts=E, top_k=TOP)
    key_dn = ktune.mxfp4_problem(n=HID, k=INTER, num_experts=E, top_k=TOP)
    w_gu = rng.integers(0, 256, size=(E, 2 * INTER, HID // 2), dtype=np.uint8)
    s_gu = rng.integers(119, 124, size=(E, 2 * INTER, HID // 32), dtype=np.uint8)
    w_dn = rng.integers(0, 256, size=(E, HID, INTER // 2), dtype=np.uint8)
    s_dn = rng.integers(119, 124, size=(E, HID, INTER // 32), dtype=np.uint8)
    W_gu, W_dn = kt.mxfp4_weight(w_gu, s_gu, DEV), kt.mxfp4_weight(w_dn, s_dn, DEV)
    F_gu = torch.from_numpy(mxfp4.dequantize(w_gu, s_gu)).to(DEV)
    F_dn = torch.from_numpy(mxfp4.dequantize(w_dn, s_dn)).to(DEV)
    g = torch.Generator(device=DEV).manual_seed(int(rng.integers(1 << 31)))
    b_gu = (torch.randn(E, 2 * INTER, device=DEV, generator=g) * 0.1).to(torch.bfloat16)
    b_dn = (torch.randn(E, HID, device=DEV, generator=g) * 0.1).to(torch.bfloat16)
    w_router = torch.randn(HID, E, device=DEV, generator=g).to(torch.bfloat16)
    x = torch.zeros(T, HID, dtype=torch.bfloat16, device=DEV)
    experts = torch.arange(E, device=DEV)
    st = {}

    def route():
        logits = (x @ w_router).float()
        top = logits.topk(TOP, dim=-1)
        weight = top.values.softmax(-1).flatten()  # [M]
        expert = top.indices.flatten()  # [M]
        order = torch.sort(expert, stable=True).indices
        token = order // TOP
        counts = (expert[:, None] == experts[None, :]).sum(0)  # no bincount: its size would need a host read
        offsets = torch.cat([torch.zeros(1, dtype=torch.int64, device=DEV), counts.cumsum(0)]).to(torch.int32)
        return weight[order], token, offsets

    def forward():
        w, token, offsets = route()
        a = x[token]
        gu = ktune.mxfp4_gemm(key_gu, a, W_gu, bias=b_gu, expert_offsets=offsets)
        gate, up = gu[:, :INTER].float(), gu[:, INTER:].float()
        h = (torch.nn.functional.silu(gate) * up).to(torch.bfloat16)
        dn = ktune.mxfp4_gemm(key_dn, h, W_dn, bias=b_dn, expert_offsets=offsets)
        y = torch.zeros(T, HID, device=DEV).index_add_(0, token, dn.float() * w[:, None])
        st.update(h=h, y=y, token=token, offsets=offsets, w=w)

    def reference():
        w, token, offsets = st["w"], st["token"], st["offsets"].tolist()
        a = x[token].float()
        gu = torch.empty(M, 2 * INTER, device=DEV)
        for e in range(E):
            lo, hi = offsets[e], offsets[e + 1]
            gu[lo:hi] = a[lo:hi] @ F_gu[e].T + b_gu[e].float()
        h = st["h"].float()  # the kernel's own bf16 activations feed the second GEMM of the reference
        gate, up = gu[:, :INTER], gu[:, INTER:]
        h_ref = torch.nn.functional.silu(gate) * up
        dn = torch.empty(M, HID, device=DEV)
        for e in range(E):
            lo, hi = offsets[e], offsets[e + 1]
            dn[lo:hi] = h[lo:hi] @ F_dn[e].T + b_dn[e].float()
        y = torch.zeros(T, HID, device=DEV).index_add_(0, token, dn * w[:, None])
        return max(((st["h"].float() - h_ref).norm() / h_ref.norm()).item(),
                   ((st["y"] - y).norm() / y.norm()).item())

    def fill():
        x.copy_(torch.randn(T, HID, device=DEV, generator=g))

    worst, replay_us, eager_us = replay_steps(forward, lambda: fill, reference, steps, eager_reps)
    return [dict(part=f"moe T{T} E{E} top-{TOP} (gate_up + down)", steps=steps, worst_rel_l2=worst, tolerance=1e-2,
                 graph_us=replay_us, eager_us=eager_us, ok=worst < 1e-2)]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--seed", type=int, default=int(time.time()) % 100000)
    ap.add_argument("--parts", default="xqa,mla,moe")
    ap.add_argument("--reps", type=int, default=20, help="replays / eager steps timed per bucket")
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    if not torch.cuda.is_available():
        print("engine_decode: needs a CUDA GPU", file=sys.stderr)
        return 2
    rng = np.random.default_rng(args.seed)
    print(f"engine_decode: seed {args.seed}, {args.steps} steps per bucket, {torch.cuda.get_device_name()}")
    parts = {"xqa": run_xqa, "mla": run_mla, "moe": run_moe}
    rows = []
    for name in args.parts.split(","):
        rows += parts[name](rng, args.steps, args.reps)
    print("\n| bucket | steps | worst rel L2 vs fp32 reference | tolerance | graph replay us/step | eager us/step |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['part']} | {r['steps']} | {r['worst_rel_l2']:.2e} | {r['tolerance']:.0e} | {r['graph_us']:.1f} | "
              f"{r['eager_us']:.1f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(seed=args.seed, device=torch.cuda.get_device_name(), rows=rows), f, indent=2)
    bad = [r["part"] for r in rows if not r["ok"]]
    if bad:
        print(f"engine_decode: FAILED: {', '.join(bad)}", file=sys.stderr)
        return 1
    print("engine_decode: every step matched its reference; no host synchronization inside a step")
    return 0


if __name__ == "__main__":
    sys.exit(main())
