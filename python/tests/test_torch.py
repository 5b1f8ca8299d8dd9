"""PyTorch tests (skip without torch; the GPU ones skip without CUDA): the README story (warm up a preset, call
the XQA op from PyTorch, right answer vs a torch reference), fake (meta) kernels, CUDA-graph capture + replay of
each op with fresh inputs, and a torch.compile(fullgraph=True) function calling them. bench/run_h200.sh python
runs them on the H200."""

import math
import os
import sys
import threading
import unittest

import numpy as np

try:
    import torch
except ImportError:  # CI: no torch
    torch = None

import ktune
from ktune import numerics
from ktune.xqa import parse_key

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_problems  # noqa: E402
from gating import skip_unless  # noqa: E402
from xqa_reference import make_case, reference, rel_l2  # noqa: E402

SEED = int(os.environ.get("KTUNE_TEST_SEED", np.random.SeedSequence().entropy % (1 << 31)))
HAVE_CUDA = torch is not None and torch.cuda.is_available()


def to_torch(a, dtype, device):
    """A NumPy storage array (bf16 bits / float16 / e4m3 codes / int32 / float32) as a torch tensor of `dtype`."""
    if a is None:
        return None
    a = np.ascontiguousarray(a)
    if dtype == "bf16":
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16).to(device)
    if dtype == "e4m3":
        return torch.from_numpy(a.view(np.uint8)).view(torch.float8_e4m3fn).to(device)
    if a.dtype == np.uint32:
        return torch.from_numpy(a.view(np.int32)).to(device)
    return torch.from_numpy(a).to(device)


def to_numpy_float(t, dtype):
    t = t.detach().cpu()
    if dtype == "bf16":
        return numerics.bf16_to_float(t.view(torch.int16).numpy().view(np.uint16))
    if dtype == "e4m3":
        return numerics.e4m3_to_float(t.view(torch.uint8).numpy())
    return t.float().numpy()


def torch_case(info, case, device):
    return dict(q=to_torch(case["q"], info.q_dtype, device), kv_cache=to_torch(case["kv_cache"], info.kv_dtype, device),
                block_tables=to_torch(case["block_tables"], None, device), seq_lens=to_torch(case["seq_lens"], None, device),
                q_cu_seq_lens=to_torch(case["q_cu_seq_lens"], None, device), mask=to_torch(case.get("mask"), None, device),
                sinks=to_torch(case.get("sinks"), None, device))


def torch_reference_q1(q, kv, bt, sl, page_size, scale):
    """Plain torch fp32 paged attention for q_len 1, HND, no mask: the README story's reference."""
    B, hq, d = q.shape
    hkv = kv.shape[2]
    out = torch.empty(B, hq, d, dtype=torch.float32, device=q.device)
    for b in range(B):
        L = int(sl[b])
        pages = bt[b, : (L + page_size - 1) // page_size].long()
        k = kv[pages, 0].permute(1, 0, 2, 3).reshape(hkv, -1, d)[:, :L].float()
        v = kv[pages, 1].permute(1, 0, 2, 3).reshape(hkv, -1, d)[:, :L].float()
        qb = q[b].float().view(hkv, hq // hkv, d)
        p = (torch.einsum("hgd,hld->hgl", qb, k) * scale).softmax(-1)
        out[b] = torch.einsum("hgl,hld->hgd", p, v).reshape(hq, d)
    return out


def case_from_torch(info, t, q_lens):
    """The NumPy case (storage arrays) holding what the torch tensors hold now."""
    def bits(x, dtype):
        x = x.detach().cpu()
        if dtype == "bf16":
            return x.view(torch.int16).numpy().view(np.uint16)
        if dtype == "e4m3":
            return x.view(torch.uint8).numpy()
        return x.numpy()
    case = dict(q=bits(t["q"], info.q_dtype), kv_cache=bits(t["kv_cache"], info.kv_dtype),
                block_tables=t["block_tables"].cpu().numpy(), seq_lens=t["seq_lens"].cpu().numpy(), q_lens=q_lens,
                q_cu_seq_lens=None if t["q_cu_seq_lens"] is None else t["q_cu_seq_lens"].cpu().numpy())
    if t["sinks"] is not None:
        case["sinks"] = t["sinks"].cpu().numpy()
    if t["mask"] is not None:
        case["mask"] = t["mask"].cpu().numpy().view(np.uint32)
    return case


def check_against_reference(test, info, case, got_out, got_lse=None, scale=None, tol=5e-3, **scalars):
    scale = scale if scale is not None else 1.0 / math.sqrt(info.head_dim)
    ref_out, ref_lse = reference(info, case, scale, **scalars)
    got = to_numpy_float(got_out, info.out_dtype)
    live = ~np.isnan(ref_out).all(axis=(1, 2))
    test.assertTrue(np.isfinite(got[live]).all(), "non-finite output in a live row")
    err = rel_l2(got[live], ref_out[live])
    test.assertLess(err, tol, f"{info.key}: rel L2 {err:.2e}")
    if got_lse is not None and info.lse:
        lerr = float(np.abs(got_lse.cpu().numpy()[live] - ref_lse[live]).max())
        test.assertLess(lerr, 2e-3, f"{info.key}: LSE max abs error {lerr:.2e}")
    return err


@unittest.skipIf(torch is None, "torch is not installed")
class TorchOps(unittest.TestCase):
    def test_registered_with_fake_kernels(self):
        import ktune.torch_ops  # noqa: F401
        self.assertTrue(hasattr(torch.ops.ktune, "xqa_decode"))
        self.assertTrue(hasattr(torch.ops.ktune, "xqa_decode_out"))
        key = ktune.xqa_problem(**gpu_problems.SPEC_PROBLEM)
        info = parse_key(key)
        from torch._subclasses.fake_tensor import FakeTensorMode
        with FakeTensorMode():
            q = torch.empty(12, info.num_q_heads, info.head_dim, dtype=torch.bfloat16)
            kv = torch.empty(9, 2, info.num_kv_heads, info.page_size, info.head_dim, dtype=torch.bfloat16)
            bt = torch.empty(3, 3, dtype=torch.int32)
            sl = torch.empty(3, dtype=torch.int32)
            sinks = torch.empty(info.num_q_heads, dtype=torch.float32)
            out, lse = torch.ops.ktune.xqa_decode(q, kv, bt, sl, None, None, sinks, key, 64, -1.0, 1.0, 1.0, 1.0, 1.0,
                                                  0.0, -1, 0, "", None, None, None, None, None, None)
            self.assertEqual(tuple(out.shape), (12, info.num_q_heads, info.head_dim))
            self.assertEqual(out.dtype, torch.bfloat16)
            self.assertEqual(tuple(lse.shape), (12, info.num_q_heads))
            # the engine forms: a strided q, the (k_cache, v_cache) pair, a device-held scale
            qkv = torch.empty(12, info.num_q_heads + 2 * info.num_kv_heads, info.head_dim, dtype=torch.bfloat16)
            one = torch.empty(1, dtype=torch.float32)
            out, lse = torch.ops.ktune.xqa_decode(qkv[:, :info.num_q_heads], None, bt, sl, None, None, sinks, key, 64,
                                                  -1.0, 1.0, 1.0, 1.0, 1.0, 0.0, -1, 0, "", kv[:, 0], kv[:, 1], None,
                                                  one, one, None)
            self.assertEqual(tuple(out.shape), (12, info.num_q_heads, info.head_dim))
            self.assertEqual(tuple(lse.shape), (12, info.num_q_heads))

    def test_family_fake_kernels(self):
        import ktune.torch_ops  # noqa: F401
        from torch._subclasses.fake_tensor import FakeTensorMode
        if "sparse_mla_decode" in ktune.families():
            key = ktune.mla_problem(**gpu_problems.MLA_PROBLEMS[0])
            with FakeTensorMode():
                q = torch.empty(5, 16, 576, dtype=torch.bfloat16)
                kv = torch.empty(4, 64, 656, dtype=torch.uint8)
                idx = torch.empty(5, 128, dtype=torch.int32)
                out, lse = torch.ops.ktune.sparse_mla_decode(q, kv, idx, None, key, -1.0, True, 0, "")
                self.assertEqual((tuple(out.shape), out.dtype, tuple(lse.shape)), ((5, 16, 512), torch.bfloat16, (5, 16)))
        if "mxfp4_gemm" in ktune.families():
            key = ktune.mxfp4_problem(**gpu_problems.MXFP4_PROBLEMS[1])
            with FakeTensorMode():
                a = torch.empty(7, 512, dtype=torch.bfloat16)
                c = torch.ops.ktune.mxfp4_gemm(a, torch.empty(10, dtype=torch.uint8), torch.empty(10, dtype=torch.uint8),
                                               None, torch.empty(5, dtype=torch.int32), key, 1, "")
                self.assertEqual((tuple(c.shape), c.dtype), ((7, 256), torch.bfloat16))

    def test_prepared_op_per_thread(self):
        # an op holds one argument struct: threads calling the same custom op must not share it
        from ktune.torch_ops import prepared_op
        key = ktune.xqa_problem(**gpu_problems.README_PROBLEM)
        mine = prepared_op(key)
        self.assertIs(prepared_op(key), mine)
        theirs = []
        t = threading.Thread(target=lambda: theirs.append(prepared_op(key)))
        t.start()
        t.join()
        self.assertEqual(len(theirs), 1)
        self.assertIsNot(theirs[0], mine)

    def test_bad_tensor_names_the_argument(self):
        import ktune.torch_ops  # noqa: F401
        key = ktune.xqa_problem(**gpu_problems.README_PROBLEM)
        q = torch.zeros(2, 32, 64, dtype=torch.bfloat16)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.xqa_decode(key, q, torch.zeros(1), torch.zeros(2, 1, dtype=torch.int32),
                             torch.zeros(2, dtype=torch.int32), max_seq_len=8)
        self.assertIn("q:", c.exception.message)

    def test_bad_softmax_scale_is_refused_not_replaced_by_the_default(self):
        import ktune.torch_ops  # noqa: F401
        key = ktune.xqa_problem(**gpu_problems.README_PROBLEM)
        q = torch.zeros(2, 32, 64, dtype=torch.bfloat16)
        for bad in (-0.125, -1.0, 0.0, float("nan")):
            with self.assertRaisesRegex(ktune.InvalidArgumentError, "softmax_scale: expected a finite value > 0"):
                ktune.torch_ops.xqa_decode(key, q, torch.zeros(1), torch.zeros(2, 1, dtype=torch.int32),
                                           torch.zeros(2, dtype=torch.int32), max_seq_len=8, softmax_scale=bad)


@skip_unless("gpu", HAVE_CUDA, "needs torch with CUDA")
class TorchGpu(unittest.TestCase):
    dev = "cuda"

    def test_1_readme_story(self):
        # exactly the README steps: warm up a preset, build the problem, call the op from PyTorch
        report = ktune.warmup(**gpu_problems.README_PRESET)
        print(f"\nwarmup: keys {report.keys} tuned {report.tuned} done earlier {report.already_done} "
              f"compiled {report.compiled} cache hits {report.cache_hits} failed {report.failed} "
              f"wall {report.wall_ms / 1000:.1f} s", file=sys.stderr)
        self.assertEqual(report.failed, 0)
        self.assertGreater(report.tuned + report.already_done, 0)
        self.assertEqual(report.device, torch.cuda.current_device())
        key = ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32)
        g = torch.Generator(device="cuda").manual_seed(SEED)
        B, ps, max_seq_len = 4, 32, 1024
        seq_lens = torch.randint(1, max_seq_len + 1, (B,), dtype=torch.int32, device="cuda", generator=g)
        pages_per_req = max_seq_len // ps
        num_pages = B * pages_per_req + 5
        block_tables = torch.randperm(num_pages, device="cuda", generator=g)[: B * pages_per_req]
        block_tables = block_tables.view(B, pages_per_req).to(torch.int32)
        kv_cache = torch.randn(num_pages, 2, 8, ps, 128, device="cuda", generator=g).to(torch.bfloat16)
        q = torch.randn(B, 32, 128, device="cuda", generator=g).to(torch.bfloat16)
        out = ktune.xqa_decode(key, q, kv_cache, block_tables, seq_lens, max_seq_len=max_seq_len)
        ref = torch_reference_q1(q, kv_cache, block_tables, seq_lens, ps, 1 / math.sqrt(128))
        torch.cuda.synchronize()
        err = ((out.float() - ref).norm() / ref.norm()).item()
        print(f"readme story: rel L2 vs torch fp32 {err:.2e}; stats {ktune.runtime().stats()}", file=sys.stderr)
        self.assertLess(err, 5e-3)
        self.assertEqual(out.dtype, torch.bfloat16)
        if os.environ.get("KTUNE_EXPECT_NO_JIT") == "1":
            self.assertEqual(ktune.runtime().stats()["compiles"], 0, "the warmed-up cache should need no compile")

    def _inputs(self, fields, rng, batch, seq_lens, **kw):
        key = ktune.xqa_problem(**fields)
        info = parse_key(key)
        # rows wide enough for max_seq_len 1024 (the library checks max_pages_per_req * page_size >= max_seq_len)
        case = make_case(rng, info, batch, seq_lens, max_pages=1024 // info.page_size, **kw)
        return key, info, case, torch_case(info, case, self.dev)

    def test_2_ops_eager_all_problems(self):
        rng = np.random.default_rng(SEED)
        for fields in gpu_problems.ALL:
            ragged = fields.get("mask") == "explicit"
            info0 = parse_key(ktune.xqa_problem(**fields))
            B = 3
            q_lens = [info0.max_q_len, 0, 1] if ragged else None
            seq = [int(rng.integers(info0.max_q_len, 900)), 0 if ragged else int(rng.integers(info0.max_q_len, 50)),
                   int(rng.integers(info0.max_q_len, 700))]
            key, info, case, t = self._inputs(fields, rng, B, seq, q_lens=q_lens, ragged=ragged)
            sc = dict(window_left=int(rng.integers(0, 200))) if info.sliding_window else {}
            if info.kv_dtype == "e4m3":
                sc.update(k_scale=float(rng.uniform(0.5, 1.5)), v_scale=float(rng.uniform(0.5, 1.5)))
            res = ktune.xqa_decode(key, t["q"], t["kv_cache"], t["block_tables"], t["seq_lens"], max_seq_len=1024,
                                   q_cu_seq_lens=t["q_cu_seq_lens"], mask=t["mask"], sinks=t["sinks"], **sc)
            out, lse = res if info.lse else (res, None)
            torch.cuda.synchronize()
            tol = 1e-2 if info.kv_dtype == "e4m3" else 5e-3
            err = check_against_reference(self, info, case, out, lse, tol=tol, **sc)
            print(f"eager {key}: rel L2 {err:.2e}", file=sys.stderr)

    def test_3_cuda_graph_capture_and_replay(self):
        rng = np.random.default_rng(SEED + 1)
        for variant in ("functional", "out"):
            fields = gpu_problems.SPEC_PROBLEM
            B, max_seq_len = 3, 1024
            key, info, case, t = self._inputs(fields, rng, B, [1000, 0, 517])  # request 1: padding
            out_buf = torch.empty(t["q"].shape[0], info.num_q_heads, info.head_dim, dtype=torch.bfloat16, device="cuda")
            lse_buf = torch.empty(t["q"].shape[0], info.num_q_heads, dtype=torch.float32, device="cuda")

            def step():
                if variant == "functional":
                    return ktune.xqa_decode(key, t["q"], t["kv_cache"], t["block_tables"], t["seq_lens"],
                                            max_seq_len=max_seq_len, sinks=t["sinks"])
                return ktune.xqa_decode(key, t["q"], t["kv_cache"], t["block_tables"], t["seq_lens"],
                                        max_seq_len=max_seq_len, sinks=t["sinks"], out=out_buf, lse=lse_buf)

            s = torch.cuda.Stream()
            s.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(s):
                step()  # warm up: module load happens outside the capture
            torch.cuda.current_stream().wait_stream(s)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                g_out, g_lse = step()
            # fresh inputs written into the captured buffers (same block table), new lengths, then replay
            cap = min(max_seq_len, t["block_tables"].shape[1] * info.page_size)
            for trial in range(2):
                g = torch.Generator(device="cuda").manual_seed(SEED + 17 * trial + (variant == "out"))
                t["q"].copy_(torch.randn(t["q"].shape, device="cuda", generator=g).to(t["q"].dtype))
                t["kv_cache"].copy_(torch.randn(t["kv_cache"].shape, device="cuda", generator=g).to(t["kv_cache"].dtype))
                t["sinks"].copy_(torch.randn(t["sinks"].shape, device="cuda", generator=g))
                seq = [int(rng.integers(info.max_q_len, cap + 1)), 0, int(rng.integers(info.max_q_len, cap + 1))]
                t["seq_lens"].copy_(torch.tensor(seq, dtype=torch.int32))
                (g_out if variant == "functional" else out_buf).fill_(float("nan"))
                graph.replay()
                torch.cuda.synchronize()
                new = case_from_torch(info, t, np.full(B, info.max_q_len, dtype=np.int32))
                err = check_against_reference(self, info, new, g_out, g_lse)
                print(f"graph {variant} replay {trial} seq_lens {seq}: rel L2 {err:.2e}", file=sys.stderr)

    def test_4_torch_compile_fullgraph(self):
        rng = np.random.default_rng(SEED + 2)
        key, info, case, t = self._inputs(gpu_problems.SPEC_PROBLEM, rng, 2, [700, 333])
        key1, info1, case1, t1 = self._inputs(gpu_problems.README_PROBLEM, rng, 2, [900, 41])
        resid = torch.randn(t1["q"].shape, device="cuda").to(torch.bfloat16)
        out_buf = torch.empty_like(t1["q"])

        def fn(q, kv, bt, sl, sinks, q1, kv1, bt1, sl1, resid):
            o, lse = ktune.xqa_decode(key, q, kv, bt, sl, max_seq_len=1024, sinks=sinks)
            o1 = ktune.xqa_decode(key1, q1, kv1, bt1, sl1, max_seq_len=1024)
            ktune.xqa_decode(key1, q1, kv1, bt1, sl1, max_seq_len=1024, out=out_buf)
            return o.float() * 2.0, lse + 1.0, o1.float() + resid.float(), out_buf.float() - 1.0

        args = (t["q"], t["kv_cache"], t["block_tables"], t["seq_lens"], t["sinks"], t1["q"], t1["kv_cache"],
                t1["block_tables"], t1["seq_lens"], resid)
        eager = fn(*args)
        compiled = torch.compile(fn, fullgraph=True)
        got = compiled(*args)
        torch.cuda.synchronize()
        for e, g in zip(eager, got):
            self.assertTrue(torch.equal(e, g), "compiled output differs from eager")
        check_against_reference(self, info, case, (got[0] / 2.0).to(torch.bfloat16), got[1] - 1.0)
        ref1 = torch_reference_q1(t1["q"], t1["kv_cache"], t1["block_tables"], t1["seq_lens"], info1.page_size,
                                  1 / math.sqrt(128))
        err = ((got[2] - resid.float() - ref1).norm() / ref1.norm()).item()
        self.assertLess(err, 1e-2)
        print(f"torch.compile(fullgraph=True): outputs equal eager; rel L2 {err:.2e}", file=sys.stderr)

    def test_4b_torch_compile_fullgraph_via_torch_ops(self):
        import ktune.torch_ops as kt
        rng = np.random.default_rng(SEED + 4)
        key, info, case, t = self._inputs(gpu_problems.FP8_PROBLEM, rng, 2, [600, 77], q_lens=[2, 1], ragged=True)

        def fn(q, kv, bt, sl, cu, mask):
            return kt.xqa_decode(key, q, kv, bt, sl, max_seq_len=1024, q_cu_seq_lens=cu, mask=mask,
                                 window_left=100).float().sum(-1)

        args = (t["q"], t["kv_cache"], t["block_tables"], t["seq_lens"], t["q_cu_seq_lens"], t["mask"])
        eager = fn(*args)
        got = torch.compile(fn, fullgraph=True)(*args)
        torch.cuda.synchronize()
        self.assertTrue(torch.allclose(eager, got, rtol=1e-5, atol=1e-4))
        out = kt.xqa_decode(key, *args[:4], max_seq_len=1024, q_cu_seq_lens=args[4], mask=args[5], window_left=100)
        check_against_reference(self, info, case, out, tol=1e-2, window_left=100)

    def test_5_opcheck(self):
        import ktune.torch_ops  # noqa: F401
        rng = np.random.default_rng(SEED + 3)
        key, info, case, t = self._inputs(gpu_problems.SPEC_PROBLEM, rng, 2, [100, 200])
        args = (t["q"], t["kv_cache"], t["block_tables"], t["seq_lens"], None, None, t["sinks"], key, 1024, -1.0, 1.0,
                1.0, 1.0, 1.0, 0.0, -1, 0, "", None, None, None, None, None, None)
        torch.library.opcheck(torch.ops.ktune.xqa_decode.default, args,
                              test_utils=("test_schema", "test_faketensor"))
        kv = t["kv_cache"]
        scale = torch.ones(1, dtype=torch.float32, device="cuda")
        args = (t["q"], None, t["block_tables"], t["seq_lens"], None, None, t["sinks"], key, 1024, -1.0, 1.0, 1.0,
                1.0, 1.0, 0.0, -1, 0, "", kv[:, 0], kv[:, 1], None, scale, scale, None)
        torch.library.opcheck(torch.ops.ktune.xqa_decode.default, args,
                              test_utils=("test_schema", "test_faketensor"))

    def test_6_engine_forms(self):
        """q sliced out of a fused QKV buffer, a strided out, the (k_cache, v_cache) pair in the three ways engines
        hold it, scales as float32[1] CUDA tensors; through the wrapper, the prepared op and a CUDA graph replayed
        after the device-held v_scale changed."""
        import ktune.torch_ops as kt
        from ktune.ops import XqaDecodeOp
        rng = np.random.default_rng(SEED + 6)
        key, info, case, t = self._inputs(gpu_problems.README_PROBLEM, rng, 3, [900, 0, 300])
        hq, hkv, d = info.num_q_heads, info.num_kv_heads, info.head_dim
        n_tok = t["q"].shape[0]
        qkv = torch.full((n_tok, hq + 2 * hkv, d), float("nan"), dtype=t["q"].dtype, device="cuda")
        qkv[:, :hq] = t["q"]
        q = qkv[:, :hq]
        kv = t["kv_cache"]
        stacked = torch.stack([kv[:, 0], kv[:, 1]]).contiguous()
        pairs = {"views": (kv[:, 0], kv[:, 1]), "stacked": (stacked[0], stacked[1]),
                 "separate": (kv[:, 0].contiguous(), kv[:, 1].contiguous())}
        k_scale, v_scale = float(rng.uniform(0.5, 1.5)), float(rng.uniform(0.5, 1.5))
        ks = torch.tensor([k_scale], dtype=torch.float32, device="cuda")
        vs = torch.tensor([v_scale], dtype=torch.float32, device="cuda")
        ref_scales = dict(k_scale=float(np.float32(k_scale)), v_scale=float(np.float32(v_scale)))
        for name, pair in pairs.items():
            with self.subTest(form=name):
                out = kt.xqa_decode(key, q, pair, t["block_tables"], t["seq_lens"], max_seq_len=1024, k_scale=ks,
                                    v_scale=vs)
                torch.cuda.synchronize()
                check_against_reference(self, info, case, out, tol=1e-2, **ref_scales)
                out_buf = torch.full((n_tok, hq, d + 8), float("nan"), dtype=out.dtype, device="cuda")
                op = XqaDecodeOp.for_tensors(q, pair, layout=info.layout)
                self.assertEqual(op.key, key)
                op(q, pair, t["block_tables"], t["seq_lens"], max_seq_len=1024, out=out_buf[:, :, :d], k_scale=ks,
                   v_scale=vs)
                torch.cuda.synchronize()
                check_against_reference(self, info, case, out_buf[:, :, :d].contiguous(), tol=1e-2, **ref_scales)
                self.assertTrue(torch.isnan(out_buf[:, :, d:].float()).all().item(), "out padding was written")
        # a captured graph follows the device-held v_scale
        op = XqaDecodeOp(key)
        out = torch.full((n_tok, hq, d), float("nan"), dtype=t["q"].dtype, device="cuda")
        call = lambda: op(q, pairs["views"], t["block_tables"], t["seq_lens"], max_seq_len=1024, out=out,  # noqa: E731
                          k_scale=ks, v_scale=vs)
        call()
        torch.cuda.synchronize()
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            call()
        g.replay()
        torch.cuda.synchronize()
        first = out.float().clone()
        vs.mul_(2.0)
        g.replay()
        torch.cuda.synchronize()
        live = ~torch.isnan(first).all(-1).all(-1)
        self.assertTrue(torch.equal(out.float()[live], 2 * first[live]))


def _family(name):
    try:
        return name in ktune.families()
    except ktune.KtuneError:
        return False


def mla_inputs(info, T, num_pages, seed, device="cuda"):
    """Random q, cache (fp8_ds_mla rows built as the format says, or bf16), indices with -1 holes and one token
    with none valid; returns the tensors and the fp32 K rows [slots, rank + rope] the cache holds."""
    g = torch.Generator(device=device).manual_seed(seed)
    r, d, ps, H = info.kv_lora_rank, info.rope_dim, info.page_size, info.num_heads
    latent = torch.randn(num_pages, ps, r, device=device, generator=g)
    rope = torch.randn(num_pages, ps, d, device=device, generator=g).to(torch.bfloat16)
    if info.kv_dtype == "fp8ds":
        tiles = latent.view(num_pages, ps, r // 128, 128)
        scale = (tiles.abs().amax(-1, keepdim=True) / 448.0).clamp_min(1e-6)
        codes = (tiles / scale).to(torch.float8_e4m3fn)
        deq = (codes.float() * scale).view(num_pages, ps, r)
        kv = torch.empty(num_pages, ps, info.row_bytes, dtype=torch.uint8, device=device)
        kv[..., :r] = codes.view(torch.uint8).view(num_pages, ps, r)
        kv[..., r:r + 4 * (r // 128)] = scale.squeeze(-1).contiguous().view(torch.uint8).view(num_pages, ps, -1)
        kv[..., r + 4 * (r // 128):] = rope.view(torch.uint8).view(num_pages, ps, 2 * d)
        k_rows = torch.cat([deq, rope.float()], dim=-1).view(-1, r + d)
    else:
        kv = torch.cat([latent.to(torch.bfloat16), rope], dim=-1).contiguous()
        k_rows = kv.float().view(-1, r + d)
    q = torch.randn(T, H, r + d, device=device, generator=g).to(torch.bfloat16)
    idx = torch.randint(0, num_pages * ps, (T, info.topk), device=device, generator=g, dtype=torch.int32)
    holes = torch.rand(T, info.topk, device=device, generator=g) < 0.1
    idx[holes] = -1
    idx[T - 1] = -1  # a token with nothing to attend to: O = 0
    return q, kv, idx, k_rows


def mla_reference(q, idx, k_rows, r, scale):
    T, H, _ = q.shape
    out = torch.zeros(T, H, r, device=q.device)
    for t in range(T):
        sel = idx[t][idx[t] >= 0].long()
        if sel.numel() == 0:
            continue
        K = k_rows[sel]
        p = (q[t].float() @ K.T * scale).softmax(-1)
        out[t] = p @ K[:, :r]
    return out


@skip_unless("gpu", HAVE_CUDA, "needs torch with CUDA")
class TorchGpuFamilies(unittest.TestCase):
    @unittest.skipUnless(_family("sparse_mla_decode"), "no sparse_mla_decode in this libktune")
    def test_sparse_mla_eager_graph_compile(self):
        from ktune import mla
        for n, fields in enumerate(gpu_problems.MLA_PROBLEMS):
            key = ktune.mla_problem(**fields)
            info = mla.parse_key(key)
            T, P = 6, 8
            q, kv, idx, k_rows = mla_inputs(info, T, P, SEED + n)
            scale = 1 / math.sqrt(info.kv_lora_rank + info.rope_dim)
            out = ktune.sparse_mla_decode(key, q, kv, idx)
            ref = mla_reference(q, idx, k_rows, info.kv_lora_rank, scale)
            torch.cuda.synchronize()
            err = ((out.float() - ref).norm() / ref.norm()).item()
            self.assertLess(err, 1e-2, f"{key}: rel L2 {err:.2e}")
            self.assertTrue(torch.equal(out[T - 1].float(), torch.zeros_like(ref[T - 1])))
            print(f"\nsparse_mla eager {key}: rel L2 {err:.2e}", file=sys.stderr)
            # q as a slice of a wider buffer (padded heads and rows): the same answer through the q strides
            dq = info.kv_lora_rank + info.rope_dim
            wide = torch.full((T, info.num_heads + 1, dq + 8), float("nan"), device="cuda").to(torch.bfloat16)
            wide[:, :info.num_heads, :dq] = q
            out_s = ktune.sparse_mla_decode(key, wide[:, :info.num_heads, :dq], kv, idx)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(out_s, out), f"{key}: a strided q gives another result")
            # q expanded over heads (stride 0) is refused: the library would read it as dense rows
            with self.assertRaisesRegex(ktune.InvalidArgumentError, "q: expected no stride of 0"):
                ktune.sparse_mla_decode(key, q[:, :1].expand(q.shape), kv, idx)
            # CUDA graph: capture once, replay with new q and indices
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                g_out = ktune.sparse_mla_decode(key, q, kv, idx)
            q2, _, idx2, _ = mla_inputs(info, T, P, SEED + 100 + n)
            q.copy_(q2)
            idx.copy_(idx2)
            graph.replay()
            torch.cuda.synchronize()
            ref2 = mla_reference(q, idx, k_rows, info.kv_lora_rank, scale)
            err2 = ((g_out.float() - ref2).norm() / ref2.norm()).item()
            self.assertLess(err2, 1e-2)
            # torch.compile(fullgraph=True)
            fn = torch.compile(lambda q, kv, idx: ktune.sparse_mla_decode(key, q, kv, idx, return_lse=True),
                               fullgraph=True)
            o3, lse3 = fn(q, kv, idx)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(o3, g_out))
            self.assertEqual(tuple(lse3.shape), (T, info.num_heads))
            print(f"sparse_mla graph replay rel L2 {err2:.2e}; compiled output equals the graph's", file=sys.stderr)

    @unittest.skipUnless(_family("mxfp4_gemm"), "no mxfp4_gemm in this libktune")
    def test_mxfp4_eager_graph_compile(self):
        import ktune.torch_ops as kt
        from ktune import mxfp4
        rng = np.random.default_rng(SEED + 7)
        for fields in gpu_problems.MXFP4_PROBLEMS:
            key = ktune.mxfp4_problem(**fields)
            info = mxfp4.parse_key(key)
            E, n, k = info.num_experts, info.n, info.k
            w = rng.integers(0, 256, size=(E, n, k // 2), dtype=np.uint8)
            s = rng.integers(118, 126, size=(E, n, k // 32), dtype=np.uint8)
            weight = kt.mxfp4_weight(w, s, "cuda")
            wf = torch.from_numpy(mxfp4.dequantize(w, s)).cuda()
            bias = torch.randn(E, n, device="cuda").to(torch.bfloat16)
            if info.grouped:
                rows = rng.integers(0, 9, size=E)
                rows[1] = 0  # an expert with no tokens
                offs = np.concatenate([[0], np.cumsum(rows)]).astype(np.int32)
                m = int(offs[-1])
                offsets = torch.from_numpy(offs).cuda()
            else:
                m, offs, offsets = 13, np.array([0, 13], np.int32), None
            a = torch.randn(m, k, device="cuda").to(torch.bfloat16)

            def ref_of(a):
                r = torch.empty(m, n, device="cuda")
                for e in range(E):
                    lo, hi = int(offs[e]), int(offs[e + 1])
                    r[lo:hi] = a[lo:hi].float() @ wf[e].T + bias[e].float()
                return r

            b = bias if info.grouped else bias[0]
            if info.grouped:  # one bias row for every expert: the kernels would read past it
                with self.assertRaisesRegex(ktune.InvalidArgumentError, "bias"):
                    ktune.mxfp4_gemm(key, a, weight, bias=bias[0], expert_offsets=offsets)
            c = ktune.mxfp4_gemm(key, a, weight, bias=b, expert_offsets=offsets)
            torch.cuda.synchronize()
            ref = ref_of(a)
            err = ((c.float() - ref).norm() / ref.norm()).item()
            self.assertLess(err, 5e-3, f"{key}: rel L2 {err:.2e}")
            print(f"\nmxfp4 eager {key}: rel L2 {err:.2e}", file=sys.stderr)
            # `a` with strided rows (a slice of a wider activation buffer): its row stride goes to the library as lda
            wide = torch.full((m, k + 64), float("nan"), device="cuda").to(torch.bfloat16)
            wide[:, :k] = a
            c2 = ktune.mxfp4_gemm(key, wide[:, :k], weight, bias=b, expert_offsets=offsets)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(c2, c), f"{key}: a strided a gives another result")
            if m > 1:  # one row expanded to m (row stride 0) is refused: the library would read it as lda = k
                with self.assertRaisesRegex(ktune.InvalidArgumentError, "a: expected no stride of 0"):
                    ktune.mxfp4_gemm(key, a[:1].expand(a.shape), weight, bias=b, expert_offsets=offsets)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                g_c = ktune.mxfp4_gemm(key, a, weight, bias=b, expert_offsets=offsets)
            a.copy_(torch.randn(m, k, device="cuda").to(torch.bfloat16))
            graph.replay()
            torch.cuda.synchronize()
            ref2 = ref_of(a)
            err2 = ((g_c.float() - ref2).norm() / ref2.norm()).item()
            self.assertLess(err2, 5e-3)
            fn = torch.compile(lambda a: ktune.mxfp4_gemm(key, a, weight, bias=b, expert_offsets=offsets).float() + 1,
                               fullgraph=True)
            got = fn(a)
            torch.cuda.synchronize()
            self.assertTrue(torch.equal(got, g_c.float() + 1))
            print(f"mxfp4 graph replay rel L2 {err2:.2e}; compiled output equals eager", file=sys.stderr)

if __name__ == "__main__":
    unittest.main()
