"""Prepared ops (ktune.ops): what ktune_op_prepare / ktune_op_run refuse without a GPU, that closing a runtime
closes its ops, and on a GPU (with torch) that XqaDecodeOp computes what the one-shot op computes and re-checks
tensors whose shapes change."""

import ctypes
import os
import sys
import unittest

import numpy as np

try:
    import torch
except ImportError:  # CI: no torch
    torch = None

import ktune
from ktune import _lib
from ktune.errors import InvalidArgumentError, NotFoundError
from ktune.ops import Op

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gating import skip_unless  # noqa: E402

KEY = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none"
HAVE_CUDA = torch is not None and torch.cuda.is_available()


class OpsWithoutGpu(unittest.TestCase):
    def setUp(self):
        import tempfile
        self.dir = tempfile.TemporaryDirectory()
        self.rt = ktune.Runtime(cache=os.path.join(self.dir.name, "ops.db"))

    def tearDown(self):
        self.rt.close()
        self.dir.cleanup()

    def xqa_args(self):
        a = _lib._XqaArgs()
        _lib.lib().ktune_xqa_args_default(ctypes.byref(a))
        a.batch, a.num_tokens, a.max_seq_len, a.max_pages_per_req, a.num_pages = 1, 1, 64, 2, 2
        return a

    def test_prepare_errors_name_family_and_field(self):
        with self.assertRaises(NotFoundError):
            Op("no_such_family", KEY, self.rt)
        with self.assertRaisesRegex(InvalidArgumentError, "num_kv_heads"):
            Op("xqa_decode", dict(head_dim=128, num_q_heads=32, num_kv_heads=5, page_size=32), self.rt)

    def test_run_checks_arguments_and_struct_header(self):
        op = Op("xqa_decode", KEY, self.rt)
        a = self.xqa_args()
        with self.assertRaisesRegex(InvalidArgumentError, "q: expected a device pointer"):
            op.run(ctypes.byref(a))
        m = _lib._MlaArgs()
        _lib.lib().ktune_sparse_mla_args_default(ctypes.byref(m))
        with self.assertRaisesRegex(InvalidArgumentError, "family_id"):
            op.run(ctypes.byref(m))
        a.config, a.num_splits = b"t64.s3.w4", 2
        plan = op.plan(ctypes.byref(a))  # forced config and splits: no GPU needed
        self.assertEqual((plan["config"], plan["source"], plan["num_splits"]), ("t64.s3.w4", "forced", 2))
        self.assertGreater(plan["workspace_bytes"], 0)

    def test_dtype_fields_take_torch_names(self):
        key = ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32, q_dtype="bfloat16",
                                kv_dtype="float8_e4m3fn")
        self.assertEqual(key, "d128.h32.kv8.p32.hnd.bf16-e4m3-bf16.q1.none")
        with self.assertRaisesRegex(InvalidArgumentError, "q_dtype"):
            ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, q_dtype="float32")

    def test_closing_the_runtime_closes_its_ops(self):
        op = Op("xqa_decode", KEY, self.rt)
        self.rt.close()
        with self.assertRaisesRegex(InvalidArgumentError, "op must not be NULL"):
            op.run(ctypes.byref(self.xqa_args()))


@skip_unless("gpu", HAVE_CUDA, "needs torch with CUDA")
class XqaDecodeOpGpu(unittest.TestCase):
    def test_matches_the_one_shot_op_and_rechecks_new_shapes(self):
        from ktune.ops import XqaDecodeOp
        g = torch.Generator(device="cuda").manual_seed(int(np.random.SeedSequence().entropy % (1 << 31)))
        B, ps, L = 3, 32, 700
        pages = (L + ps - 1) // ps
        kv = torch.randn(B * pages, 2, 8, ps, 128, device="cuda", generator=g).to(torch.bfloat16)
        bt = torch.randperm(B * pages, device="cuda", generator=g).view(B, pages).to(torch.int32)
        sl = torch.randint(1, L + 1, (B,), device="cuda", generator=g, dtype=torch.int32)
        q = torch.randn(B, 32, 128, device="cuda", generator=g).to(torch.bfloat16)
        op = XqaDecodeOp(KEY)
        out = torch.full((B, 32, 128), float("nan"), device="cuda", dtype=torch.bfloat16)
        op(q, kv, bt, sl, max_seq_len=L, out=out)
        ref = ktune.xqa_decode(KEY, q, kv, bt, sl, max_seq_len=L)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out, ref))
        # new inputs with the shapes seen before take the fast path and still compute the right thing
        q2 = torch.randn(B, 32, 128, device="cuda", generator=g).to(torch.bfloat16)
        op(q2, kv, bt, sl, max_seq_len=L, out=out)
        ref2 = ktune.xqa_decode(KEY, q2, kv, bt, sl, max_seq_len=L)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out, ref2))
        # a shape the op has not seen goes through the full check again, naming the argument
        with self.assertRaisesRegex(InvalidArgumentError, "out: expected shape"):
            op(q, kv, bt, sl, max_seq_len=L, out=out[:2])
        with self.assertRaisesRegex(InvalidArgumentError, "q: expected"):
            op(q.float(), kv, bt, sl, max_seq_len=L, out=out)

    def test_problem_from_tensors(self):
        from ktune.ops import XqaDecodeOp
        q = torch.empty(4, 32, 128, device="cuda", dtype=torch.bfloat16)
        kv = torch.empty(9, 2, 8, 16, 128, device="cuda", dtype=torch.float8_e4m3fn)
        self.assertEqual(XqaDecodeOp.for_tensors(q, kv).key, "d128.h32.kv8.p16.hnd.bf16-e4m3-bf16.q1.none")
        nhd = torch.empty(9, 2, 64, 4, 128, device="cuda", dtype=torch.bfloat16)
        self.assertEqual(XqaDecodeOp.for_tensors(q, nhd, layout="nhd", max_q_len=4).key,
                         "d128.h32.kv4.p64.nhd.bf16-bf16-bf16.q4.causal")
        with self.assertRaisesRegex(InvalidArgumentError, "kv_cache: expected"):
            XqaDecodeOp.for_tensors(q, torch.empty(9, 2, 8, 16, 64, device="cuda", dtype=torch.bfloat16))


if __name__ == "__main__":
    unittest.main()
