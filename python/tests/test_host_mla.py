"""CPU tests of sparse_mla_decode through NumPy on the host backend (ktune.host_mla) against an fp64 NumPy
reference written here from the layout in docs/sparse_mla_decode.md: fp8_ds_mla and bf16 caches, sinks, -1
entries, a token with only -1, LSE, the host plan, and an out-of-range slot refused naming token and entry.
KTUNE_TEST_SEED replays a seed; skips, saying why, when libktune_host.so (LLVM 19) is absent."""

import os
import sys
import tempfile
import unittest

import numpy as np

import ktune
from ktune import numerics

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gating import skip_test  # noqa: E402

SEED = int(os.environ.get("KTUNE_TEST_SEED", np.random.SeedSequence().entropy % (1 << 31)))
print(f"python host MLA tests: seed {SEED} (KTUNE_TEST_SEED={SEED} replays)", file=sys.stderr)
_TMP = tempfile.TemporaryDirectory(prefix="ktune-pytest-mla-")
RT = None
HOST_WHY = None


def setUpModule():
    global RT, HOST_WHY
    RT = ktune.Runtime(cache=os.path.join(_TMP.name, "ktune.db"), read_only=False, allow_jit=True)
    try:
        RT.compile("sparse_mla_decode", "h16.r512.d64.k64.p64.bf16-fp8ds.q1", "host")
    except ktune.NoCompilerError as e:
        HOST_WHY = str(e)


def make_case(rng, fmt, heads, topk, page, tokens, sinks):
    """Random cache rows in random pages, random -1s, token 0 with only -1s; returns arrays and fp32 rows."""
    lat, rope = 512, 64
    dim = lat + rope
    pages = (topk + page - 1) // page + 3
    vals = rng.standard_normal((pages, page, dim)).astype(np.float32)
    vals[..., :lat] *= rng.uniform(0.25, 2.25, (pages, page, lat // 128)).repeat(128, axis=-1).astype(np.float32)
    if fmt == "fp8_ds_mla":
        tiles = vals[..., :lat].reshape(pages, page, lat // 128, 128)
        scale = (np.abs(tiles).max(axis=-1) / 448.0).astype(np.float32)
        codes = numerics.float_to_e4m3(tiles / scale[..., None])
        rope_bits = numerics.float_to_bf16(vals[..., lat:])
        kv = np.concatenate([codes.reshape(pages, page, lat), scale.view(np.uint8).reshape(pages, page, -1),
                             rope_bits.view(np.uint8).reshape(pages, page, -1)], axis=-1)
        rows = np.concatenate([(numerics.e4m3_to_float(codes).astype(np.float64) * scale[..., None]).reshape(
            pages, page, lat), numerics.bf16_to_float(rope_bits)], axis=-1)
    else:
        kv = numerics.float_to_bf16(vals)
        rows = numerics.bf16_to_float(kv).astype(np.float64)
    kv = np.ascontiguousarray(kv)
    q = numerics.float_to_bf16(rng.standard_normal((tokens, heads, dim)).astype(np.float32))
    idx = rng.integers(0, pages * page, (tokens, topk)).astype(np.int32)
    idx[rng.random((tokens, topk)) < 0.2] = -1
    idx[0] = -1
    s = rng.uniform(-1, 3, heads).astype(np.float32) if sinks else None
    return q, kv, idx, s, rows.reshape(pages * page, dim)


def reference(q, rows, idx, sinks, scale):
    qf = numerics.bf16_to_float(q).astype(np.float64)
    T, H, _ = qf.shape
    out = np.zeros((T, H, 512))
    lse = np.full((T, H), -np.inf)
    for t in range(T):
        sel = idx[t][idx[t] >= 0]
        k = rows[sel]
        logits = qf[t] @ k.T * scale  # [H, n]
        m = logits.max(axis=1) if sel.size else np.full(H, -np.inf)
        if sinks is not None:
            m = np.maximum(m, sinks)
        p = np.exp(logits - m[:, None])
        den = p.sum(axis=1) + (np.exp(sinks - m) if sinks is not None else 0.0)
        ok = den > 0
        out[t][ok] = (p @ k[:, :512])[ok] / den[ok, None]
        lse[t][ok] = m[ok] + np.log(den[ok])
    return out, lse


class MlaHost(unittest.TestCase):
    def setUp(self):
        if HOST_WHY:
            skip_test(self, "host", f"host backend unavailable: {HOST_WHY}")

    def run_case(self, fmt, heads, topk, page, tokens, sinks, strided_q=False, **kw):
        key = ktune.mla_problem(heads, 512, 64, topk, page_size=page, kv_dtype=fmt)
        rng = np.random.default_rng([SEED, heads, topk])
        q, kv, idx, s, rows = make_case(rng, fmt, heads, topk, page, tokens, sinks)
        q_in = q
        if strided_q:  # q as a slice of a wider NaN-filled buffer: heads and rows padded
            wide = np.full((tokens, heads + 1, 576 + 8), 0x7FC0, dtype=np.uint16)
            wide[:, :heads, :576] = q
            q_in = wide[:, :heads, :576]
        scale = 1.5 / np.sqrt(576.0)
        out = np.full((tokens, heads, 512), 0xFFFF, dtype=np.uint16)  # NaN poison
        got, lse = ktune.sparse_mla_decode(key, q_in, kv, idx, sinks=s, softmax_scale=scale, out=out,
                                           return_lse=True, runtime=RT, **kw)
        self.assertIs(got, out)
        ref, ref_lse = reference(q, rows, idx, s, scale)
        g = numerics.bf16_to_float(out).astype(np.float64)
        self.assertTrue(np.isfinite(g).all())
        err = np.linalg.norm(g - ref) / np.linalg.norm(ref)
        self.assertLess(err, 5e-3, f"{key}: rel L2 {err:.2e}")
        self.assertTrue((g[0] == 0).all(), "a token with only -1 must give zeros")
        if s is None:
            self.assertTrue(np.isneginf(lse[0]).all())
        fin = np.isfinite(ref_lse)
        self.assertTrue((np.isfinite(lse) == fin).all())
        self.assertLess(np.abs(lse[fin] - ref_lse[fin]).max(), 2e-3)
        return key

    def test_fp8_ds_mla_sinks(self):
        self.run_case("fp8_ds_mla", 16, 128, 64, 3, True)

    def test_bf16_split_and_plan(self):
        key = self.run_case("bf16", 16, 256, 256, 2, False, num_splits=3, threads=2)
        plan = ktune.sparse_mla_decode_plan(key, 1, threads=4, runtime=RT)
        self.assertIn(plan["source"], ("tuned", "default"))
        self.assertGreaterEqual(plan["num_splits"], 2)  # 1 token x 1 head group on 4 threads: split the top-k
        forced = ktune.sparse_mla_decode_plan(key, 2, config="t64.g8.v8.u4", num_splits=2, runtime=RT)
        self.assertEqual((forced["config"], forced["source"], forced["num_splits"]), ("t64.g8.v8.u4", "forced", 2))

    def test_strided_q(self):
        self.run_case("fp8_ds_mla", 16, 128, 64, 3, True, strided_q=True)
        self.run_case("bf16", 16, 256, 256, 2, False, strided_q=True, num_splits=3, threads=2)

    def test_broadcast_q_is_refused(self):
        # q expanded over heads (stride 0) would reach the library as dense rows: reads past the view.
        key = ktune.mla_problem(16, 512, 64, 64, page_size=64)
        q, kv, idx, _, _ = make_case(np.random.default_rng(SEED + 8), "fp8_ds_mla", 16, 64, 64, 2, False)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.sparse_mla_decode(key, np.broadcast_to(q[:, :1], q.shape), kv, idx, runtime=RT)
        self.assertIn("q: expected no stride of 0", c.exception.message)

    def test_partial_element_strides_and_read_only_out_are_refused(self):
        key = ktune.mla_problem(16, 512, 64, 64, page_size=64)
        q, kv, idx, _, _ = make_case(np.random.default_rng(SEED + 9), "fp8_ds_mla", 16, 64, 64, 3, False)
        # q's rows one byte apart from whole elements: strides // itemsize would silently read other rows.
        raw = np.zeros(q.nbytes + 64, dtype=np.uint16)
        odd = np.lib.stride_tricks.as_strided(raw, shape=q.shape, strides=(q.strides[0] + 1, q.strides[1], 2))
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "q: expected strides in whole elements"):
            ktune.sparse_mla_decode(key, odd, kv, idx, runtime=RT)
        out = np.full((3, 16, 512), 0xFFFF, dtype=np.uint16)
        out.flags.writeable = False
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "out: expected a writeable array"):
            ktune.sparse_mla_decode(key, q, kv, idx, out=out, runtime=RT)
        self.assertTrue((out == 0xFFFF).all(), "a read-only out was written")
        with self.assertRaisesRegex(ktune.InvalidArgumentError, "num_tokens: expected a 32-bit int"):
            ktune.sparse_mla_decode_plan(key, 2**32 + 1, runtime=RT)

    def test_out_of_range_slot_names_token_and_entry(self):
        key = ktune.mla_problem(16, 512, 64, 64, page_size=64)
        rng = np.random.default_rng(SEED + 7)
        q, kv, idx, _, _ = make_case(rng, "fp8_ds_mla", 16, 64, 64, 2, False)
        idx[1, 9] = kv.shape[0] * 64
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.sparse_mla_decode(key, q, kv, idx, runtime=RT)
        self.assertIn("token 1, entry 9", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.sparse_mla_decode(key, q, kv[:, :, :100], idx, runtime=RT)
        self.assertIn("kv_cache", c.exception.message)


if __name__ == "__main__":
    unittest.main()
