"""The README's Python quickstart, run as written: a new user with only the README calls the XQA op from
PyTorch and gets the right answer. The python block under README.md's "## Python" heading is extracted
and exec'd unchanged; this harness only supplies what the README leaves to the user -- the engine's tensors
`q`, `kv_cache`, `block_tables`, `seq_lens` in the documented layout (docs/xqa_decode.md: bf16, HND paged cache
[num_pages, 2, num_kv_heads, page_size, head_dim]) -- and then checks `out` against plain torch fp32 attention.

Run by tests/readme/readme_story.sh after the README's shell steps, with the same python3. Needs a CUDA GPU."""
import math
import pathlib
import re
import sys
import time

import torch

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def readme_block(heading, lang):
    """The first ```lang fenced block after the line `heading`."""
    text = README.read_text()
    start = text.index("\n" + heading + "\n")
    m = re.compile(r"^```" + lang + r"\n(.*?)^```", re.S | re.M).search(text, start)
    if not m:
        sys.exit(f"readme_story: no ```{lang} block after '{heading}' in {README}")
    return m.group(1)


def reference(q, kv, bt, sl, page_size):
    """fp32 paged attention, q_len 1, no mask, softmax scale 1/sqrt(head_dim) (the op's default)."""
    B, hq, d = q.shape
    hkv = kv.shape[2]
    out = torch.empty(B, hq, d, dtype=torch.float32, device=q.device)
    for b in range(B):
        L = int(sl[b])
        pages = bt[b, : (L + page_size - 1) // page_size].long()
        k = kv[pages, 0].permute(1, 0, 2, 3).reshape(hkv, -1, d)[:, :L].double()
        v = kv[pages, 1].permute(1, 0, 2, 3).reshape(hkv, -1, d)[:, :L].double()
        qb = q[b].double().view(hkv, hq // hkv, d)
        p = (torch.einsum("hgd,hld->hgl", qb, k) / math.sqrt(d)).softmax(-1)
        out[b] = torch.einsum("hgl,hld->hgd", p, v).reshape(hq, d).float()
    return out


def main():
    if not torch.cuda.is_available():
        print("readme_story: SKIP: needs a CUDA GPU (torch.cuda.is_available() is False)")
        return 77
    code = readme_block("## Python (PyTorch engines)", "python")
    print("README python block, run unchanged:\n" + code)
    # The engine's state the README call consumes: Llama-3.1-8B shapes (32 q heads, 8 kv heads, head_dim 128,
    # page 32), ragged sequence lengths up to the README's max_seq_len=4096, pages scattered over the pool.
    g = torch.Generator(device="cuda").manual_seed(int(time.time()))
    B, hq, hkv, d, ps, max_seq_len = 8, 32, 8, 128, 32, 4096
    seq_lens = torch.randint(1, max_seq_len + 1, (B,), dtype=torch.int32, device="cuda", generator=g)
    seq_lens[0] = max_seq_len  # one full-length request
    per_req = max_seq_len // ps
    num_pages = B * per_req + 17
    block_tables = torch.randperm(num_pages, device="cuda", generator=g)[: B * per_req].view(B, per_req).to(torch.int32)
    kv_cache = torch.randn(num_pages, 2, hkv, ps, d, device="cuda", generator=g).to(torch.bfloat16)
    q = torch.randn(B, hq, d, device="cuda", generator=g).to(torch.bfloat16)
    env = dict(q=q, kv_cache=kv_cache, block_tables=block_tables, seq_lens=seq_lens)

    t0 = time.time()
    exec(compile(code, "README.md", "exec"), env)
    torch.cuda.synchronize()
    wall = time.time() - t0
    ktune = env["ktune"]
    stats = ktune.runtime().stats()
    out = env["out"]
    # A second call, timed alone: after the warmup it must compile nothing.
    before = ktune.runtime().stats()["compiles"]
    out2 = env["ktune"].xqa_decode(env["key"], q, kv_cache, block_tables, seq_lens, max_seq_len=max_seq_len)
    torch.cuda.synchronize()
    compiles_after = ktune.runtime().stats()["compiles"] - before

    ref = reference(q, kv_cache, block_tables, seq_lens, ps)
    err = ((out.float() - ref).norm() / ref.norm()).item()
    worst = (out.float() - ref).abs().max().item()
    print(f"readme story: {wall:.1f} s (warmup + call); runtime stats {stats}")
    print(f"readme story: out {tuple(out.shape)} {out.dtype}; rel L2 vs fp64 torch {err:.2e}, max abs {worst:.2e}; "
          f"second call compiles {compiles_after}; identical {torch.equal(out, out2)}")
    ok = (out.dtype == torch.bfloat16 and tuple(out.shape) == (B, hq, d) and err < 5e-3 and compiles_after == 0
          and torch.isfinite(out.float()).all().item() and torch.equal(out, out2))
    print("readme story:", "PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
