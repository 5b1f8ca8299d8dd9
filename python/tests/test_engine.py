"""ktune.engine (docs/engines.md): the draft-mask packer and q_cu_seq_lens on NumPy (the library's host forms, CI)
against an independent NumPy reference, their argument errors, and on the GPU (torch; skipped elsewhere) the same
calls against the host forms, MaskCache's stable buffers, and a DecodePlan captured in a CUDA graph and replayed
with new steps against the fp64 reference. Fresh random data; KTUNE_TEST_SEED replays a run."""

import math
import os
import sys
import unittest

import numpy as np

try:
    import torch
except ImportError:  # CI: no torch
    torch = None

import ktune
from ktune.xqa import parse_key

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_torch as ft  # noqa: E402
import gpu_problems  # noqa: E402
from gating import skip_unless  # noqa: E402
from xqa_reference import make_case, reference, rel_l2  # noqa: E402

SEED = int(os.environ.get("KTUNE_TEST_SEED", np.random.SeedSequence().entropy % (1 << 31)))
HAVE_CUDA = torch is not None and torch.cuda.is_available()
POISON = np.uint32(0xA5C3A5C3)


def explicit_key(max_q_len):
    return ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32, max_q_len=max_q_len,
                             mask="explicit")


def ref_words(bools, lens, starts, q_len, words, rows, source="bool"):
    """Bit by bit: request b's rows starts[b] .. starts[b] + lens[b], keys below min(len, q_len)."""
    out = np.full((rows, words), POISON, dtype=np.uint32)
    for b, n in enumerate(lens):
        for i in range(n):
            r = starts[b] + i
            out[r] = 0
            for j in range(min(n, q_len)):
                vis = bool(bools[r, j]) if source == "bool" else (j <= i if source == "causal" else True)
                if vis:
                    out[r, j // 32] |= np.uint32(1 << (j % 32))
    return out


def random_case(rng, max_q_len, ragged):
    batch = int(rng.integers(1, 8))
    q_len = int(rng.integers(1, max_q_len + 1))
    if ragged:
        lens = [0 if rng.random() < 0.25 else int(rng.integers(1, max_q_len + 1)) for _ in range(batch)]
        cu = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
        rows = min(int(cu[-1]) + int(rng.integers(0, 3)), batch * max_q_len)
        starts = cu[:-1]
    else:
        lens, cu, rows = [q_len] * batch, None, batch * q_len
        starts = [b * q_len for b in range(batch)]
    bools = rng.integers(0, 2, size=(rows, q_len)).astype(np.bool_)
    return batch, q_len, lens, cu, rows, starts, bools


print(f"test_engine seed {SEED} (KTUNE_TEST_SEED replays)", file=sys.stderr)


class EngineHost(unittest.TestCase):
    def test_pack_mask_matches_reference(self):
        rng = np.random.default_rng(SEED)
        for max_q_len in (1, 3, 8, 16):
            key = explicit_key(max_q_len)
            for trial in range(10):
                ragged = trial % 2 == 1
                batch, q_len, lens, cu, rows, starts, bools = random_case(rng, max_q_len, ragged)
                src = ("bool", "causal", "full")[trial % 3]
                out = np.full((rows, 1), POISON, dtype=np.uint32)
                if src == "bool":
                    got = ktune.xqa_pack_mask(bools, key, q_cu_seq_lens=cu, out=out)
                else:
                    got = ktune.xqa_pack_mask(None, key, q_cu_seq_lens=cu, out=out, source=src, q_len=q_len,
                                              batch=batch)
                self.assertIs(got, out)
                want = ref_words(bools, lens, starts, q_len, 1, rows, src)
                np.testing.assert_array_equal(out, want, err_msg=f"{key} {src} lens {lens} rows {rows}")

    def test_pack_mask_uint8_and_3d_uniform(self):
        rng = np.random.default_rng(SEED + 1)
        key = explicit_key(4)
        bools = rng.integers(0, 3, size=(5, 4, 4)).astype(np.uint8)  # any nonzero is visible
        got = ktune.xqa_pack_mask(bools, key)
        self.assertEqual(got.shape, (20, 1))
        want = ref_words(bools.reshape(20, 4), [4] * 5, [4 * b for b in range(5)], 4, 1, 20)
        np.testing.assert_array_equal(got, want)

    def test_q_cu_seq_lens(self):
        rng = np.random.default_rng(SEED + 2)
        key = explicit_key(16)
        for batch in (0, 1, 7, 3000):
            q_lens = rng.integers(0, 17, size=batch).astype(np.int32)
            got = ktune.q_cu_seq_lens(q_lens, key)
            np.testing.assert_array_equal(got, np.concatenate([[0], np.cumsum(q_lens)]).astype(np.int32))

    def test_a_closed_runtime_raises_the_invalid_argument_class(self):
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            rt = ktune.Runtime(cache=os.path.join(d, "c.db"))
            rt.close()
            with self.assertRaisesRegex(ktune.InvalidArgumentError, "used after close"):
                rt.stats()

    def test_helpers_follow_the_default_runtime(self):
        # The helpers keep one op per key; after set_runtime (the old runtime closed) they use the new one.
        import tempfile
        key = explicit_key(16)
        q_lens = np.array([3, 0, 5], dtype=np.int32)
        want = np.array([0, 3, 3, 8], dtype=np.int32)
        before = ktune.runtime()
        try:
            with tempfile.TemporaryDirectory() as d:
                for i in range(2):
                    rt = ktune.Runtime(cache=os.path.join(d, f"r{i}.db"))
                    ktune.set_runtime(rt)
                    np.testing.assert_array_equal(ktune.q_cu_seq_lens(q_lens, key), want)
                    rt.close()
        finally:
            ktune.set_runtime(before)
        np.testing.assert_array_equal(ktune.q_cu_seq_lens(q_lens, key), want)

    def test_a_replaced_runtime_is_not_kept_alive_by_the_helpers(self):
        # The helpers' ops (one per key) hold their runtime: after set_runtime, the next helper call drops the old
        # runtime's ops of every key, not only those of the key it is called with.
        import gc
        import tempfile
        import weakref
        q_lens = np.array([3, 0, 4], dtype=np.int32)
        before = ktune.runtime()
        with tempfile.TemporaryDirectory() as d:
            try:
                old = ktune.Runtime(cache=os.path.join(d, "old.db"))
                ktune.set_runtime(old)
                for max_q_len in (4, 16):
                    ktune.q_cu_seq_lens(q_lens, explicit_key(max_q_len))
                gone = weakref.ref(old)
                del old
                new = ktune.Runtime(cache=os.path.join(d, "new.db"))
                ktune.set_runtime(new)
                ktune.q_cu_seq_lens(q_lens, explicit_key(4))
                gc.collect()
                self.assertIsNone(gone(), "the replaced runtime is still held by the helpers' ops")
            finally:
                ktune.set_runtime(before)
            new.close()

    def test_errors_name_the_argument(self):
        key = explicit_key(4)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, r"q_lens\[1\]"):
            ktune.q_cu_seq_lens(np.array([1, 5], dtype=np.int32), key)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "q_lens"):
            ktune.q_cu_seq_lens(np.array([1, 2], dtype=np.int64), key)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "q_len"):
            ktune.xqa_pack_mask(np.ones((5, 5), dtype=np.bool_), key)  # 5 > max_q_len 4
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "bool_mask"):
            ktune.xqa_pack_mask(np.ones((6, 4), dtype=np.float32), key)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, r"q_cu_seq_lens\[2\]"):
            ktune.xqa_pack_mask(np.ones((8, 4), dtype=np.bool_), key, q_cu_seq_lens=np.array([0, 4, 9], np.int32))
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "mask"):
            ktune.xqa_pack_mask(np.ones((4, 4), dtype=np.bool_),
                                ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32,
                                                  max_q_len=4, mask="causal"))
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "op"):
            ktune.xqa_pack_mask(np.ones((4, 4), dtype=np.bool_), 42)

    def test_outputs_must_be_dense_and_writeable(self):
        # The words and offsets are written densely through the output's pointer: a column view or a reversed
        # view would put them outside the view (or past its memory), a read-only array would be written anyway.
        key = explicit_key(4)
        bools = np.ones((8, 4), dtype=np.bool_)
        base = np.full((8, 2), POISON, dtype=np.uint32)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "out: expected a contiguous array"):
            ktune.xqa_pack_mask(bools, key, out=base[:, :1])
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "out: expected a contiguous array"):
            ktune.xqa_pack_mask(bools, key, out=np.full((16, 1), POISON, dtype=np.uint32)[:8][::-1])
        self.assertTrue((base == POISON).all(), "a refused call wrote the words")
        frozen = np.full((8, 1), POISON, dtype=np.uint32)
        frozen.flags.writeable = False
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "out: expected a writeable array"):
            ktune.xqa_pack_mask(bools, key, out=frozen)
        cu = np.zeros(3, dtype=np.int32)
        cu.flags.writeable = False
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "out: expected a writeable array"):
            ktune.q_cu_seq_lens(np.array([1, 2], dtype=np.int32), key, out=cu)
        self.assertTrue((frozen == POISON).all() and (cu == 0).all(), "a read-only output was written")


class TorchTensor(ft.Tensor):
    """A fake_torch tensor that ktune.engine takes for a torch tensor (it tells them by their class's module). Holds
    no memory: only calls refused before anything reaches the library may be made with it."""
    __module__ = "torch"


def fake(*shape, dtype, device):
    return TorchTensor(shape, dtype, device)


class EngineDevices(unittest.TestCase):
    """Every array of a helper call lives on the device of `out` (q_lens for q_cu_seq_lens): one on another CUDA
    device than out is refused naming the argument and both devices, as one on the host is, before anything
    reaches the library."""

    def test_pack_mask_inputs_on_another_cuda_device_are_refused(self):
        key = explicit_key(4)
        out = fake(8, 1, dtype=ft.int32, device="cuda:0")
        for dev, got in (("cuda:1", r" \(cuda:0\), got cuda:1"), ("cpu", "")):
            with self.subTest(device=dev):
                with self.assertRaisesRegex(ktune.InvalidArgumentError,
                                            "xqa_decode: bool_mask: expected the device of out" + got):
                    ktune.xqa_pack_mask(fake(8, 4, dtype=ft.uint8, device=dev), key, out=out)
                cu = fake(3, dtype=ft.int32, device=dev)
                with self.assertRaisesRegex(ktune.InvalidArgumentError,
                                            "xqa_decode: q_cu_seq_lens: expected the device of out" + got):
                    ktune.xqa_pack_mask(fake(8, 4, dtype=ft.uint8, device="cuda:0"), key, q_cu_seq_lens=cu, out=out)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "bool_mask: expected the device of out"):
            ktune.xqa_pack_mask(np.ones((8, 4), dtype=np.bool_), key, out=out)

    def test_q_cu_seq_lens_out_on_another_cuda_device_is_refused(self):
        key = explicit_key(4)
        q_lens = fake(2, dtype=ft.int32, device="cuda:1")
        for dev, got in (("cuda:0", r" \(cuda:1\), got cuda:0"), ("cpu", "")):
            with self.subTest(device=dev):
                with self.assertRaisesRegex(ktune.InvalidArgumentError,
                                            "xqa_decode: out: expected the device of q_lens" + got):
                    ktune.q_cu_seq_lens(q_lens, key, out=fake(3, dtype=ft.int32, device=dev))


@unittest.skipIf(torch is None, "torch is not installed")
@skip_unless("gpu", HAVE_CUDA, "no CUDA device")
class EngineGpu(unittest.TestCase):
    def test_pack_and_cu_match_host_forms(self):
        rng = np.random.default_rng(SEED + 3)
        for max_q_len in (2, 4, 16):
            op = ktune.ops.XqaDecodeOp(explicit_key(max_q_len))
            for trial in range(6):
                ragged = trial % 2 == 0
                batch, q_len, lens, cu, rows, starts, bools = random_case(rng, max_q_len, ragged)
                host = np.full((rows, 1), POISON, dtype=np.uint32)
                ktune.xqa_pack_mask(bools, op.key, q_cu_seq_lens=cu, out=host)
                dev_out = torch.from_numpy(np.full((rows, 1), POISON, dtype=np.uint32).view(np.int32)).cuda()
                got = ktune.xqa_pack_mask(torch.from_numpy(bools).cuda(), op,
                                          q_cu_seq_lens=None if cu is None else torch.from_numpy(cu).cuda(),
                                          out=dev_out)
                self.assertIs(got, dev_out)
                np.testing.assert_array_equal(dev_out.cpu().numpy().view(np.uint32), host)
            q_lens = rng.integers(0, max_q_len + 1, size=2500).astype(np.int32)
            got = ktune.q_cu_seq_lens(torch.from_numpy(q_lens).cuda(), op)
            np.testing.assert_array_equal(got.cpu().numpy(), ktune.q_cu_seq_lens(q_lens, op.key))

    def test_mask_cache_is_stable(self):
        op = ktune.ops.XqaDecodeOp(explicit_key(4))
        cache = ktune.MaskCache(op, max_batch=8)
        for q_len in (1, 3, 4):
            for causal in (True, False):
                a = cache.get(q_len, causal)
                self.assertEqual(a.data_ptr(), cache.get(q_len, causal).data_ptr())
                self.assertEqual(tuple(a.shape), (8 * q_len, 1))
                want = ref_words(None, [q_len] * 8, [q_len * b for b in range(8)], q_len, 1, 8 * q_len,
                                 "causal" if causal else "full")
                np.testing.assert_array_equal(a.cpu().numpy().view(np.uint32), want)
                self.assertEqual(cache.mask_for(2, q_len, causal).data_ptr(), a.data_ptr())

    def test_decode_plan_graph_replay(self):
        rng = np.random.default_rng(SEED + 4)
        key = ktune.xqa_problem(**gpu_problems.ENGINE_PROBLEM)
        info = parse_key(key)
        bucket, max_seq_len, ql = 4, 1024, info.max_q_len
        pages = max_seq_len // info.page_size
        plan = ktune.DecodePlan(ktune.ops.XqaDecodeOp(key), batch=bucket, max_seq_len=max_seq_len,
                                max_pages_per_req=pages)
        addresses = [t.data_ptr() for t in (plan.out, plan.block_tables, plan.seq_lens, plan.q_cu_seq_lens, plan.mask)]
        q_buf = torch.zeros(bucket * ql, info.num_q_heads, info.head_dim, dtype=torch.bfloat16, device="cuda")
        kv_buf = None

        def step(trial):
            nonlocal kv_buf
            n = 3  # live requests; the plan pads to the bucket
            q_lens = [ql, 0, int(rng.integers(1, ql + 1))]
            seq = [int(rng.integers(ql, max_seq_len + 1)), 0, int(rng.integers(ql, max_seq_len + 1))]
            case = make_case(rng, info, n, seq, q_lens=q_lens, ragged=True, max_pages=pages, extra_pages=0)
            kv = torch.from_numpy(case["kv_cache"].view(np.int16)).view(torch.bfloat16).cuda()
            if kv_buf is None:
                kv_buf = torch.empty_like(kv)
            kv_buf.copy_(kv)
            q_buf.zero_()
            nt = int(sum(q_lens))
            q_buf[:nt].copy_(torch.from_numpy(case["q"].view(np.int16)).view(torch.bfloat16))
            words = case["mask"]
            bools = ((words[:, None] >> np.arange(ql, dtype=np.uint32)[None, :]) & 1).astype(np.bool_)
            plan.plan(torch.from_numpy(case["seq_lens"]).cuda(), torch.from_numpy(case["block_tables"]).cuda(),
                      q_lens=torch.from_numpy(np.asarray(q_lens, np.int32)).cuda(), mask=torch.from_numpy(bools).cuda())
            return case, nt

        case, nt = step(0)
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            plan.run(q_buf, kv_buf)  # eager once: loads the module outside the capture
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            g_out, g_lse = plan.run(q_buf, kv_buf)
        for trial in range(3):
            case, nt = step(trial + 1)
            plan.out.fill_(float("nan"))
            graph.replay()
            torch.cuda.synchronize()
            ref_out, ref_lse = reference(info, case, 1.0 / math.sqrt(info.head_dim))
            got = g_out[:nt].float().cpu().numpy()
            live = ~np.isnan(ref_out).all(axis=(1, 2))
            self.assertTrue(np.isfinite(got[live]).all())
            err = rel_l2(got[live], ref_out[live])
            self.assertLess(err, 5e-3)
            lerr = float(np.abs(g_lse[:nt].cpu().numpy()[live] - ref_lse[live]).max())
            self.assertLess(lerr, 2e-3)
            print(f"decode plan replay {trial}: q_lens {case['q_lens'].tolist()} rel L2 {err:.2e}", file=sys.stderr)
        self.assertEqual(addresses, [t.data_ptr() for t in (plan.out, plan.block_tables, plan.seq_lens,
                                                             plan.q_cu_seq_lens, plan.mask)])


if __name__ == "__main__":
    unittest.main()
