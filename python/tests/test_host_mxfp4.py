"""CPU tests of the mxfp4_gemm host op (ktune.mxfp4_gemm with NumPy arrays -> ktune_mxfp4_gemm_host): dense and
grouped (uneven and empty experts), bf16 and fp16, bias, NaN scales, against an exact NumPy reference
(ktune.mxfp4.dequantize, fp64 sums), outputs poisoned with NaN first; errors name the field. Fresh data every run
(KTUNE_TEST_SEED replays). Skips, saying why, when libktune_host.so (LLVM 19) is absent."""

import os
import sys
import tempfile
import unittest

import numpy as np

import ktune
from ktune import mxfp4, numerics
from ktune.mxfp4_host import host_weight

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gating import skip_test  # noqa: E402

SEED = int(os.environ.get("KTUNE_TEST_SEED", np.random.SeedSequence().entropy % (1 << 31)))
print(f"python host mxfp4 tests: seed {SEED} (KTUNE_TEST_SEED={SEED} replays)", file=sys.stderr)
_TMP = tempfile.TemporaryDirectory(prefix="ktune-pytest-mxfp4-")
RT = None
HOST_WHY = None


def setUpModule():
    global RT, HOST_WHY
    RT = ktune.Runtime(cache=os.path.join(_TMP.name, "ktune.db"), read_only=False, allow_jit=True)
    try:
        RT.compile("mxfp4_gemm", "n100.k96.bf16-bf16", "host")
    except ktune.NoCompilerError as e:
        HOST_WHY = str(e)


def need_host(test):
    def wrapper(self):
        if HOST_WHY:
            skip_test(self, "host", f"host backend unavailable: {HOST_WHY}")
        return test(self)
    wrapper.__name__ = test.__name__
    return wrapper


def to16(x, dtype):
    return numerics.float_to_bf16(x) if dtype == "bf16" else x.astype(np.float16)


def from16(x, dtype):
    return numerics.bf16_to_float(x) if dtype == "bf16" else x.astype(np.float32)


def nonzero_normal(rng, shape, sigma=1.0):
    x = rng.normal(0.0, sigma, shape).astype(np.float32)
    x[x == 0] = 0.5 * sigma
    return x


class Mxfp4Host(unittest.TestCase):
    def run_case(self, n, k, m, experts=1, top_k=1, dtype="bf16", bias=False, counts=None, nan_at=None, rng=None,
                 lda=None):
        key = ktune.mxfp4_problem(n, k, num_experts=experts, top_k=top_k, a_dtype=dtype, out_dtype=dtype)
        wp = rng.integers(0, 256, (experts, n, k // 2), dtype=np.uint8)
        ws = rng.integers(120, 133, (experts, n, k // 32), dtype=np.uint8)
        if nan_at is not None:
            ws[:, nan_at[0], nan_at[1]] = 0xFF
        w = host_weight(wp, ws)
        a16 = to16(nonzero_normal(rng, (m, k)), dtype)
        a_in = a16
        if lda is not None:  # rows lda elements apart in a wider NaN-filled buffer
            wide = np.empty((m, lda), dtype=a16.dtype)
            wide.view(np.uint16)[...] = 0xFFFF
            wide[:, :k] = a16
            a_in = wide[:, :k]
        b16 = to16(nonzero_normal(rng, (experts, n), 4.0), dtype) if bias else None
        offsets = None
        expert_of = np.zeros(m, dtype=np.int64)
        if experts > 1:
            offsets = np.concatenate([[0], np.cumsum(counts)]).astype(np.int32)
            expert_of = np.repeat(np.arange(experts), counts)
        out = np.empty((m, n), dtype=np.uint16 if dtype == "bf16" else np.float16)
        out.view(np.uint16)[...] = 0xFFFF  # poison: NaN in bf16 and fp16
        res = ktune.mxfp4_gemm(key, a_in, w, bias=b16, expert_offsets=offsets, out=out, runtime=RT)
        self.assertIs(res, out)
        deq = mxfp4.dequantize(wp, ws).astype(np.float64)  # [E, n, k], exact
        af = from16(a16, dtype).astype(np.float64)
        prod = af[:, None, :] * deq[expert_of]            # [m, n, k], exact products
        ref = prod.sum(axis=-1)
        sabs = np.abs(prod).sum(axis=-1)
        if bias:
            ref = ref + from16(b16, dtype).astype(np.float64)[expert_of]
        got = from16(out, dtype).astype(np.float64)
        nan_cols = np.zeros(n, dtype=bool)
        if nan_at is not None:
            nan_cols[nan_at[0]] = True
            self.assertTrue(np.isnan(got[:, nan_cols]).all(), f"{key}: a NaN-scale column is not NaN")
        g, r, s = got[:, ~nan_cols], ref[:, ~nan_cols], sabs[:, ~nan_cols]
        self.assertTrue(np.isfinite(g).all(), f"{key}: an output element was not written")
        tol = np.ldexp(np.abs(r), -7) + np.ldexp(s, -16) + 1e-30
        bad = np.abs(g - r) > tol
        self.assertFalse(bad.any(), f"{key} m {m}: {int(bad.sum())} elements out of tolerance")
        rel = np.linalg.norm(g - r) / max(np.linalg.norm(r), 1e-30)
        self.assertLess(rel, 5e-3, f"{key}: rel L2 {rel:.2e}")

    @need_host
    def test_dense_bf16_and_fp16_with_bias(self):
        rng = np.random.default_rng([SEED, 1])
        for m in (1, 7, 16):
            self.run_case(100, 96, m, bias=m != 7, rng=rng)
        self.run_case(200, 320, 5, dtype="fp16", bias=True, rng=rng)

    @need_host
    def test_a_with_strided_rows(self):
        rng = np.random.default_rng([SEED, 5])
        self.run_case(100, 96, 7, rng=rng, lda=104)
        self.run_case(100, 96, 40, experts=5, top_k=2, counts=[3, 17, 0, 1, 19], rng=rng, lda=160)

    @need_host
    def test_grouped_uneven_and_empty_experts(self):
        rng = np.random.default_rng([SEED, 2])
        self.run_case(100, 96, 40, experts=5, top_k=2, bias=True, counts=[0, 17, 0, 1, 22], rng=rng)

    @need_host
    def test_nan_scale_makes_its_column_nan(self):
        rng = np.random.default_rng([SEED, 3])
        self.run_case(100, 96, 3, nan_at=(37, 1), rng=rng)

    @need_host
    def test_bad_arguments_name_the_field(self):
        key = ktune.mxfp4_problem(100, 96)
        rng = np.random.default_rng([SEED, 4])
        w = host_weight(rng.integers(0, 256, (100, 48), dtype=np.uint8), rng.integers(120, 133, (100, 3), dtype=np.uint8))
        a = numerics.float_to_bf16(nonzero_normal(rng, (4, 96)))
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "a: expected shape"):
            ktune.mxfp4_gemm(key, a[:, :64].copy(), w, runtime=RT)
        # One row broadcast to four (row stride 0) would reach the library as lda = dense: rows past the view.
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "a: expected no stride of 0"):
            ktune.mxfp4_gemm(key, np.broadcast_to(a[:1], a.shape), w, runtime=RT)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "expert_offsets"):
            ktune.mxfp4_gemm(key, a, w, expert_offsets=np.zeros(2, dtype=np.int32), runtime=RT)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "config"):
            ktune.mxfp4_gemm(key, a, w, config="bm3.tn2.kt4", runtime=RT)
        stale = mxfp4.Mxfp4Weight(w.n, w.k, w.num_experts, w.packed, w.scales, w.layout_version + 1)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "weight.layout_version"):
            ktune.mxfp4_gemm(key, a, stale, runtime=RT)
        # A weight of another shape: read past its end if the call took it (the library sizes it from the problem).
        small = host_weight(rng.integers(0, 256, (32, 32), dtype=np.uint8), rng.integers(120, 133, (32, 2), dtype=np.uint8))
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "weight: expected n, k, num_experts = 100, 96, 1"):
            ktune.mxfp4_gemm(key, a, small, runtime=RT)
        frozen = np.zeros((4, 100), dtype=np.uint16)
        frozen.flags.writeable = False
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "out: expected a writeable array"):
            ktune.mxfp4_gemm(key, a, w, out=frozen, runtime=RT)
        self.assertFalse(frozen.any(), "a read-only out was written")
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "n: expected a 32-bit int"):
            mxfp4.packed_bytes(2**32 + 32, 64)  # would be the sizes of n = 32
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "n: expected 1..1048576"):
            mxfp4.packed_bytes(2**31 - 1, 64)  # past the problem limits: the sizes would overflow
        wb, sb = mxfp4.packed_bytes(100, 96)
        short = mxfp4.Mxfp4Weight(w.n, w.k, w.num_experts, w.packed[: w.packed.size // 2], w.scales, w.layout_version)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, f"weight.packed: expected {wb} bytes"):
            ktune.mxfp4_gemm(key, a, short, runtime=RT)
        short = mxfp4.Mxfp4Weight(w.n, w.k, w.num_experts, w.packed, w.scales[:-1], w.layout_version)
        with self.assertRaisesRegex(ktune.InvalidArgumentError, f"weight.scales: expected {sb} bytes"):
            ktune.mxfp4_gemm(key, a, short, runtime=RT)


if __name__ == "__main__":
    unittest.main()
