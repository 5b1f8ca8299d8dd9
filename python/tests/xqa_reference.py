"""fp64 NumPy reference of xqa_decode (docs/xqa_decode.md semantics) and a random-problem generator shared by
the host (NumPy) and GPU (torch) tests. Inputs are fresh random data every run (seed printed by the tests)."""

import math

import numpy as np

from ktune import numerics


def make_case(rng, info, batch, seq_lens, q_lens=None, ragged=False, extra_pages=3, max_pages=None):
    """Random inputs for one call. seq_lens: KV length per request (0 = padding). q_lens (ragged): query tokens
    per request. max_pages: block-table row width (the library needs max_pages * page_size >= max_seq_len).
    Unused pages are filled with NaN so a read past a request shows up in the output."""
    d, hq, hkv, ps = info.head_dim, info.num_q_heads, info.num_kv_heads, info.page_size
    seq_lens = np.asarray(seq_lens, dtype=np.int32)
    if ragged:
        q_lens = np.asarray(q_lens, dtype=np.int32)
    else:
        q_lens = np.full(batch, info.max_q_len if q_lens is None else q_lens, dtype=np.int32)
    need = max(1, int(max(-(-int(s) // ps) for s in seq_lens)))
    max_pages = need if max_pages is None else max(int(max_pages), need)  # block-table row width
    num_pages = batch * max_pages + extra_pages
    perm = rng.permutation(num_pages).astype(np.int32)
    block_tables = perm[: batch * max_pages].reshape(batch, max_pages).copy()
    if info.layout == "hnd":
        kv_shape = (num_pages, 2, hkv, ps, d)
    else:
        kv_shape = (num_pages, 2, ps, hkv, d)
    kv_f = rng.standard_normal(kv_shape).astype(np.float32)
    if info.kv_dtype == "e4m3":
        kv_f *= 2.0
    # pages no request uses: NaN (bf16/fp16) or the e4m3 NaN code
    unused = perm[batch * max_pages:]
    kv_f[unused] = np.nan
    for b in range(batch):  # tokens past the end of each request's last page: NaN too
        n = int(seq_lens[b])
        for j in range(max_pages):
            start = j * ps
            if start >= n:
                kv_f[block_tables[b, j]] = np.nan
            elif start + ps > n:
                pg = block_tables[b, j]
                if info.layout == "hnd":
                    kv_f[pg, :, :, n - start:, :] = np.nan
                else:
                    kv_f[pg, :, n - start:, :, :] = np.nan
    kv = numerics.from_float(kv_f, info.kv_dtype)
    num_tokens = int(q_lens.sum())
    q_f = rng.standard_normal((num_tokens, hq, d)).astype(np.float32)
    q = numerics.from_float(q_f, info.q_dtype)
    case = dict(q=q, kv_cache=kv, block_tables=block_tables, seq_lens=seq_lens, q_lens=q_lens,
                q_cu_seq_lens=np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32) if ragged else None)
    if info.mask == "mask":  # random draft mask (diagonal kept visible), packed by pack_mask
        rows = []
        for b in range(batch):
            n = int(q_lens[b])
            for i in range(n):
                bits = rng.integers(0, 2, size=n)
                bits[i] = 1
                rows.append(bits)
        case["mask"] = pack_mask(rows, info.max_q_len)
    if info.sinks:
        case["sinks"] = rng.standard_normal(hq).astype(np.float32)
    return case


def mask_words(max_q_len):
    """32-bit words per mask row: ceil(max_q_len / 32), the same for every row (docs/xqa_decode.md)."""
    return (int(max_q_len) + 31) // 32


def pack_mask(rows, max_q_len):
    """Draft-mask rows (one 0/1 sequence per query token, bit j = draft key j visible) -> uint32 words: shape
    [num_tokens] when max_q_len <= 32, else [num_tokens, W]; bit j of row r is bit j % 32 of word j // 32."""
    w = mask_words(max_q_len)
    words = np.zeros((len(rows), w), dtype=np.uint32)
    for r, bits in enumerate(rows):
        for j, bit in enumerate(bits):
            if bit:
                words[r, j // 32] |= np.uint32(1 << (j % 32))
    return words.reshape(len(rows)) if w == 1 else words


def mask_bit(mask, row, j):
    """Bit j of query row `row` of a mask packed by pack_mask (either shape)."""
    m = np.asarray(mask)
    word = int(m[row]) if m.ndim == 1 else int(m[row, j // 32])
    return (word >> (j % 32)) & 1 == 1


def reference(info, case, softmax_scale, q_scale=1.0, k_scale=1.0, v_scale=1.0, o_scale=1.0, softcap=0.0,
              window_left=-1):
    """fp64 out [num_tokens, hq, d] (before output rounding) and lse [num_tokens, hq]."""
    d, hq, hkv, ps = info.head_dim, info.num_q_heads, info.num_kv_heads, info.page_size
    g = hq // hkv
    q = numerics.to_float(case["q"], info.q_dtype).astype(np.float64)
    kv = numerics.to_float(case["kv_cache"], info.kv_dtype).astype(np.float64)
    bmm1 = softmax_scale * k_scale * (q_scale if info.q_dtype == "e4m3" else 1.0)
    bmm2 = v_scale / (o_scale if info.out_dtype == "e4m3" else 1.0)
    n_tok = q.shape[0]
    out = np.full((n_tok, hq, d), np.nan)
    lse = np.full((n_tok, hq), np.nan)
    t0 = 0
    for b, (L, n) in enumerate(zip(case["seq_lens"], case["q_lens"])):
        L, n = int(L), int(n)
        if L == 0 or n == 0:
            t0 += n
            continue
        pages = case["block_tables"][b]
        tok = np.arange(L)
        pg, off = pages[tok // ps], tok % ps
        if info.layout == "hnd":
            K = np.stack([kv[pg[t], 0, :, off[t], :] for t in range(L)])
            V = np.stack([kv[pg[t], 1, :, off[t], :] for t in range(L)])
        else:
            K = np.stack([kv[pg[t], 0, off[t], :, :] for t in range(L)])
            V = np.stack([kv[pg[t], 1, off[t], :, :] for t in range(L)])
        # K, V: [L, hkv, d]
        for i in range(n):
            p = L - n + i
            vis = np.ones(L, dtype=bool)
            draft0 = L - n
            for j in range(n):
                k = draft0 + j
                if info.mask == "mask":
                    vis[k] = mask_bit(case["mask"], t0 + i, j)
                else:
                    vis[k] = j <= i
            if window_left >= 0:
                vis &= tok >= p - window_left
            for h in range(hq):
                s = K[:, h // g, :] @ q[t0 + i, h] * bmm1
                if softcap > 0:
                    s = softcap * np.tanh(s / softcap)
                s = np.where(vis, s, -np.inf)
                m = s.max()
                if info.sinks:
                    m = max(m, float(case["sinks"][h]))
                w = np.exp(s - m)
                den = w.sum() + (math.exp(float(case["sinks"][h]) - m) if info.sinks else 0.0)
                out[t0 + i, h] = (w @ V[:, h // g, :]) / den * bmm2
                lse[t0 + i, h] = m + math.log(den)
        t0 += n
    return out, lse


def rel_l2(got, ref):
    got = np.asarray(got, dtype=np.float64)
    ref = np.asarray(ref, dtype=np.float64)
    return float(np.linalg.norm(got - ref) / max(np.linalg.norm(ref), 1e-30))
