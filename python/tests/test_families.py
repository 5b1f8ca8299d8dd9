"""CPU tests of the sparse_mla_decode and mxfp4_gemm bindings (no GPU, no torch): problem keys through the
library and the pure-Python parsers, MXFP4 host prepack/unpack round trip on fresh random weights, and errors
naming the argument. The GPU ops are tested in test_torch.py (skipped without torch + CUDA)."""

import os
import sys
import unittest

import numpy as np

import ktune
from ktune import mla, mxfp4

SEED = int(os.environ.get("KTUNE_TEST_SEED", np.random.SeedSequence().entropy % (1 << 31)))
print(f"python family tests: seed {SEED} (KTUNE_TEST_SEED={SEED} replays)", file=sys.stderr)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import gpu_problems  # noqa: E402


def _has(name):
    try:
        return hasattr(ktune._lib.lib(), name)
    except ktune.KtuneError:
        return False


@unittest.skipUnless("sparse_mla_decode" in ktune.families(), "this libktune has no sparse_mla_decode family")
class MlaKeys(unittest.TestCase):
    def test_keys_parse_like_the_library(self):
        for fields in gpu_problems.MLA_PROBLEMS:
            key = ktune.mla_problem(**fields)
            info = mla.parse_key(key)
            self.assertEqual((info.num_heads, info.kv_lora_rank, info.rope_dim, info.topk, info.page_size),
                             (fields["num_heads"], 512, 64, 128, 64))
            self.assertEqual(info.kv_dtype, "fp8ds" if fields["kv_dtype"] == "fp8_ds_mla" else "bf16")
            self.assertEqual(info.row_bytes, 656 if info.kv_dtype == "fp8ds" else 1152)
            self.assertEqual(ktune.problem_key("sparse_mla_decode", key), key)

    def test_bad_fields_are_named(self):
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.mla_problem(num_heads=16, kv_lora_rank=512, rope_dim=64, topk=128, kv_dtyp="bf16")
        self.assertIn("kv_dtyp", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            mla.parse_key("h16.r512")
        self.assertIn("h16.r512", c.exception.message)


@unittest.skipUnless(_has("ktune_mxfp4_unpack_host") and "mxfp4_gemm" in ktune.families(),
                     "this libktune has no mxfp4_gemm host prepack")
class Mxfp4Host(unittest.TestCase):
    def test_keys(self):
        dense = ktune.mxfp4_problem(**gpu_problems.MXFP4_PROBLEMS[0])
        grouped = ktune.mxfp4_problem(**gpu_problems.MXFP4_PROBLEMS[1])
        self.assertEqual(dense, "n256.k512.bf16-bf16")
        i = mxfp4.parse_key(grouped)
        self.assertEqual((i.n, i.k, i.num_experts, i.top_k, i.grouped), (256, 512, 4, 2, True))
        self.assertFalse(mxfp4.parse_key(dense).grouped)

    def test_prepack_unpack_round_trip(self):
        rng = np.random.default_rng(SEED)
        for e, n, k in ((1, 48, 64), (3, 40, 128)):
            w = rng.integers(0, 256, size=(e, n, k // 2), dtype=np.uint8)
            s = rng.integers(100, 150, size=(e, n, k // 32), dtype=np.uint8)
            pw, ps = mxfp4.prepack(w, s)
            self.assertEqual((pw.size, ps.size), mxfp4.packed_bytes(n, k, e))
            w2, s2 = mxfp4.unpack(pw, ps, n, k, e)
            np.testing.assert_array_equal(w2, w)
            np.testing.assert_array_equal(s2, s)
            # a changed input byte changes the packed output
            w[0, 0, 0] ^= 0x11
            self.assertFalse(np.array_equal(mxfp4.prepack(w, s)[0], pw))
        dense = rng.integers(0, 256, size=(32, 32), dtype=np.uint8)
        pw, ps = mxfp4.prepack(dense, rng.integers(120, 130, size=(32, 2), dtype=np.uint8))
        self.assertEqual((pw.size, ps.size), mxfp4.packed_bytes(32, 64, 1))

    def test_dequantize_reference(self):
        w = np.array([[[0x21, 0xF8]]], dtype=np.uint8)  # codes 1, 2, 8 (-0), 15 (-6)
        w = np.concatenate([w, np.zeros((1, 1, 14), np.uint8)], axis=-1)
        s = np.array([[[128]]], dtype=np.uint8)  # 2^1
        d = mxfp4.dequantize(w, s)
        np.testing.assert_array_equal(d[0, 0, :4], np.array([1.0, 2.0, -0.0, -12.0], np.float32))
        self.assertTrue(np.isnan(mxfp4.dequantize(w, np.full_like(s, 0xFF))).all())

    def test_errors_name_the_argument(self):
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            mxfp4.prepack(np.zeros((4, 16), np.uint8), np.zeros((4, 3), np.uint8))
        self.assertIn("w_scale", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            mxfp4.prepack(np.zeros((4, 16), np.int8), np.zeros((4, 1), np.uint8))
        self.assertIn("w_packed", c.exception.message)
        with self.assertRaises(ktune.KtuneError) as c:  # k = 24 is not a multiple of 32: the library says so
            mxfp4.prepack(np.zeros((4, 12), np.uint8), np.zeros((4, 0), np.uint8))
        self.assertIn("k: expected a positive multiple of 32 up to 1048576, got 24", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            mxfp4.unpack(np.zeros(3, np.uint8), np.zeros(3, np.uint8), 32, 64)
        self.assertIn("packed_weight", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.mxfp4_problem(n=256, k=100)
        self.assertIn("k: expected a positive multiple of 32", c.exception.message)


if __name__ == "__main__":
    unittest.main()
