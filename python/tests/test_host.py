"""CPU tests of the Python package (no GPU, no torch): xqa_decode on the host backend through NumPy against an
fp64 reference, errors carrying the library's message and status, presets/warmup on the host, discovery.
Run: python -m unittest discover -s python/tests -v   (KTUNE_LIBRARY=build/lib/libktune.so; KTUNE_TEST_SEED
replays a seed). Host-backend tests skip, saying why, when libktune_host.so (LLVM 19) is absent."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np

import ktune
from ktune import numerics
from ktune.xqa import parse_key

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gating import skip_test  # noqa: E402
from xqa_reference import make_case, reference, rel_l2  # noqa: E402

SEED = int(os.environ.get("KTUNE_TEST_SEED", np.random.SeedSequence().entropy % (1 << 31)))
print(f"python host tests: seed {SEED} (KTUNE_TEST_SEED={SEED} replays)", file=sys.stderr)
_TMP = tempfile.TemporaryDirectory(prefix="ktune-pytest-")
RT = None
HOST_WHY = None


def setUpModule():
    global RT, HOST_WHY
    RT = ktune.Runtime(cache=os.path.join(_TMP.name, "ktune.db"), read_only=False, allow_jit=True)
    ktune.set_runtime(RT)
    try:
        RT.compile("xqa_decode", "d64.h4.kv2.p16.hnd.bf16-bf16-bf16.q1.none", "host")
    except ktune.NoCompilerError as e:
        HOST_WHY = str(e)


def tearDownModule():
    ktune.set_runtime(None)  # later test modules get the environment's runtime ($KTUNE_CACHE)


def need_host(test):
    def wrapper(self):
        if HOST_WHY:
            skip_test(self, "host", f"host backend unavailable: {HOST_WHY}")
        return test(self)
    wrapper.__name__ = test.__name__
    return wrapper


class XqaHost(unittest.TestCase):
    def run_case(self, fields, batch, seq_lens, q_lens=None, ragged=False, tol=5e-3, max_pages=None, **scalars):
        key = ktune.xqa_problem(**fields)
        info = parse_key(key)
        rng = np.random.default_rng([SEED, len(key), batch])
        case = make_case(rng, info, batch, seq_lens, q_lens, ragged, max_pages=max_pages)
        n_tok = case["q"].shape[0]
        out = np.empty((n_tok, info.num_q_heads, info.head_dim), dtype=numerics.storage_dtype(info.out_dtype))
        out.view(np.uint8)[...] = 0xFF  # poison: NaN in bf16/fp16/e4m3
        lse = np.full((n_tok, info.num_q_heads), np.nan, dtype=np.float32) if info.lse else None
        scale = scalars.pop("softmax_scale", 1.0 / np.sqrt(info.head_dim))
        res = ktune.xqa_decode(key, case["q"], case["kv_cache"], case["block_tables"], case["seq_lens"],
                               q_cu_seq_lens=case["q_cu_seq_lens"], mask=case.get("mask"), sinks=case.get("sinks"),
                               softmax_scale=scale, out=out, lse=lse, **scalars)
        got_out = res[0] if info.lse else res
        self.assertIs(got_out, out)
        ref_out, ref_lse = reference(info, case, scale, **{k: v for k, v in scalars.items() if k in (
            "q_scale", "k_scale", "v_scale", "o_scale", "softcap", "window_left")})
        got = numerics.to_float(out, info.out_dtype)
        # rows of padding requests (seq_len 0) are neither read nor written: they keep the poison
        live = ~np.isnan(ref_out).all(axis=(1, 2))
        self.assertTrue(np.isfinite(got[live]).all(), "a live output row was not written or read a NaN page")
        err = rel_l2(got[live], ref_out[live])
        self.assertLess(err, tol, f"{key}: rel L2 {err:.2e}")
        if (~live).any():
            self.assertTrue(np.isnan(got[~live]).all(), "a padding request wrote output")
        if info.lse:
            lerr = np.abs(lse[live] - ref_lse[live]).max()
            self.assertLess(lerr, 2e-3, f"{key}: LSE max abs error {lerr:.2e}")
        return key

    @need_host
    def test_bf16_hnd_q1_ragged_lengths_with_padding(self):
        rng = np.random.default_rng(SEED)
        seq = [int(rng.integers(1, 200)), 0, int(rng.integers(200, 400)), int(rng.integers(1, 40))]
        # block-table rows sized for max_seq_len 512 (wider than the requests need), as an engine allocates them
        self.run_case(dict(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16), 4, seq, max_pages=32,
                      max_seq_len=512)

    @need_host
    def test_fp16_nhd_q4_causal_sinks_lse_uniform(self):
        rng = np.random.default_rng(SEED + 1)
        seq = [int(rng.integers(4, 300)) for _ in range(3)]
        self.run_case(dict(head_dim=128, num_q_heads=8, num_kv_heads=2, page_size=32, layout="nhd", q_dtype="fp16",
                           kv_dtype="fp16", max_q_len=4, mask="causal", sinks=True, lse=True), 3, seq)

    @need_host
    def test_fp8_kv_explicit_mask_ragged_window_softcap(self):
        rng = np.random.default_rng(SEED + 2)
        q_lens = [3, 0, 1, 2]
        seq = [int(rng.integers(3, 250)), 0, int(rng.integers(1, 100)), int(rng.integers(2, 300))]
        self.run_case(dict(head_dim=64, num_q_heads=8, num_kv_heads=1, page_size=16, kv_dtype="fp8", max_q_len=3,
                           mask="explicit", sliding_window=True, softcap=True), 4, seq, q_lens=q_lens, ragged=True,
                      tol=5e-3, k_scale=float(rng.uniform(0.5, 1.5)), v_scale=float(rng.uniform(0.5, 1.5)),
                      softcap=30.0, window_left=int(rng.integers(0, 64)))

    @need_host
    def test_draft_tree_q64_two_word_mask_ragged_with_padding(self):
        # 64 query tokens: two mask words a row, [num_tokens, 2] uint32; lengths across the word boundary
        rng = np.random.default_rng(SEED + 6)
        q_lens = [64, 0, 33, 17, 1]
        seq = [int(rng.integers(64, 300)), 0, int(rng.integers(33, 200)), int(rng.integers(17, 40)), 5]
        self.run_case(dict(head_dim=64, num_q_heads=8, num_kv_heads=2, page_size=16, max_q_len=64, mask="explicit",
                           sinks=True, lse=True), 5, seq, q_lens=q_lens, ragged=True)

    @need_host
    def test_draft_tree_q40_causal_uniform_and_uint16_mask(self):
        rng = np.random.default_rng(SEED + 7)
        self.run_case(dict(head_dim=64, num_q_heads=16, num_kv_heads=1, page_size=32, max_q_len=40, mask="causal",
                           kv_dtype="fp8", sliding_window=True), 2, [int(rng.integers(40, 260)) for _ in range(2)],
                      window_left=int(rng.integers(0, 80)))
        # the same explicit mask as uint16 pairs [num_tokens, 4] (low half first) gives the same answer
        key = ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16, max_q_len=40, mask="explicit")
        info = parse_key(key)
        case = make_case(rng, info, 2, [90, 41])
        a = (key, case["q"], case["kv_cache"], case["block_tables"], case["seq_lens"])
        words = ktune.xqa_decode(*a, mask=case["mask"])
        pairs = ktune.xqa_decode(*a, mask=np.ascontiguousarray(case["mask"]).view(np.uint16))
        self.assertEqual(case["mask"].shape, (80, 2))
        np.testing.assert_array_equal(words, pairs)
        ref, _ = reference(info, case, 1 / 8.0)
        self.assertLess(rel_l2(numerics.bf16_to_float(words), ref), 5e-3)

    @need_host
    def test_returns_new_out_when_not_given_and_plan(self):
        key = ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16)
        info = parse_key(key)
        rng = np.random.default_rng(SEED + 3)
        case = make_case(rng, info, 2, [37, 70])
        out = ktune.xqa_decode(key, case["q"], case["kv_cache"], case["block_tables"], case["seq_lens"])
        self.assertEqual(out.dtype, np.uint16)
        ref, _ = reference(info, case, 1 / 8.0)
        self.assertLess(rel_l2(numerics.bf16_to_float(out), ref), 5e-3)
        plan = ktune.xqa_decode_plan(key, 2, 70, threads=2)
        self.assertIn(plan["source"], ("tuned", "default"))
        self.assertGreaterEqual(plan["num_splits"], 1)
        forced = ktune.xqa_decode_plan(key, 2, 70, config="t32.v8.u1", num_splits=3, threads=2)
        self.assertEqual((forced["config"], forced["source"], forced["num_splits"]), ("t32.v8.u1", "forced", 3))


class XqaHostForms(unittest.TestCase):
    """The tensors engines hold, on the host path: q a slice of a fused QKV buffer, a padded out, the K/V pair
    (views of the combined cache, a stacked [2, num_pages, ...] array, two arrays) and scales given as arrays."""

    def check(self, fields, kv_form, scales_as_arrays):
        key = ktune.xqa_problem(**fields)
        info = parse_key(key)
        rng = np.random.default_rng([SEED, len(key), len(kv_form)])
        case = make_case(rng, info, 3, [int(rng.integers(1, 200)), 0, int(rng.integers(100, 300))])
        n_tok, hq, hkv, d = case["q"].shape[0], info.num_q_heads, info.num_kv_heads, info.head_dim
        qkv = numerics.from_float(np.full((n_tok, hq + 2 * hkv, d), np.nan, dtype=np.float32), info.q_dtype)
        qkv[:, :hq] = case["q"]
        q = qkv[:, :hq]
        self.assertFalse(q.flags["C_CONTIGUOUS"])
        out_buf = np.empty((n_tok, hq, d + 8), dtype=numerics.storage_dtype(info.out_dtype))
        out_buf.view(np.uint8)[...] = 0xFF
        out = out_buf[:, :, :d]
        kv = case["kv_cache"]
        if kv_form == "views":
            cache = (kv[:, 0], kv[:, 1])
        elif kv_form == "stacked":
            stacked = np.ascontiguousarray(np.stack([kv[:, 0], kv[:, 1]]))
            cache = (stacked[0], stacked[1])
        else:
            cache = (np.ascontiguousarray(kv[:, 0]), np.ascontiguousarray(kv[:, 1]))
        k_scale, v_scale = float(rng.uniform(0.5, 1.5)), float(rng.uniform(0.5, 1.5))
        ks = np.array([k_scale], dtype=np.float32) if scales_as_arrays else k_scale
        vs = np.array([v_scale], dtype=np.float32) if scales_as_arrays else v_scale
        scale = 1.0 / np.sqrt(d)
        ktune.xqa_decode(key, q, cache, case["block_tables"], case["seq_lens"], softmax_scale=scale, out=out,
                         k_scale=ks, v_scale=vs)
        ref, _ = reference(info, case, scale, k_scale=float(np.float32(k_scale)), v_scale=float(np.float32(v_scale)))
        got = numerics.to_float(np.ascontiguousarray(out), info.out_dtype)
        live = ~np.isnan(ref).all(axis=(1, 2))
        self.assertTrue(np.isfinite(got[live]).all(), f"{key} {kv_form}: a live row was not written")
        self.assertLess(rel_l2(got[live], ref[live]), 5e-3, f"{key} {kv_form}")
        self.assertTrue(np.isnan(got[~live]).all(), "a padding request wrote output")
        self.assertTrue((out_buf[:, :, d:].view(np.uint8) == 0xFF).all(), "out padding was written")

    @need_host
    def test_strided_q_out_and_kv_pairs(self):
        for fields in (dict(head_dim=64, num_q_heads=8, num_kv_heads=2, page_size=16, max_q_len=1),
                       dict(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=32, layout="nhd", kv_dtype="fp8")):
            for i, form in enumerate(("views", "stacked", "separate")):
                self.check(fields, form, scales_as_arrays=i != 1)

    @need_host
    def test_pair_errors_name_the_argument(self):
        key = ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16)
        info = parse_key(key)
        case = make_case(np.random.default_rng(SEED), info, 2, [20, 30])
        kv = case["kv_cache"]
        args = (key, case["q"])
        rest = (case["block_tables"], case["seq_lens"])
        for cache, field in (((kv[:, 0], None), "v_cache"), ((kv[:, 0], kv[:-1, 1]), "v_cache"),
                             ((kv[:, 0], np.ascontiguousarray(kv[:, 1])), "v_cache"),
                             ((kv[:, 0, :, :, :32], kv[:, 1, :, :, :32]), "k_cache")):
            with self.assertRaises(ktune.InvalidArgumentError) as cm:
                ktune.xqa_decode(*args, cache, *rest)
            self.assertIn(f"{field}:", str(cm.exception))
        with self.assertRaises(ktune.InvalidArgumentError) as cm:
            ktune.xqa_decode(*args, kv, *rest, k_scale=np.ones(2, dtype=np.float32))
        self.assertIn("k_scale:", str(cm.exception))
        q_bad = np.lib.stride_tricks.as_strided(case["q"], strides=(case["q"].strides[0], 2 * 64 * 2, 4))
        with self.assertRaises(ktune.InvalidArgumentError) as cm:
            ktune.xqa_decode(*args[:1], q_bad, kv, *rest)
        self.assertIn("q:", str(cm.exception))

    @need_host
    def test_broadcast_views_are_refused(self):
        # A stride of 0 reaches the library as "dense": the kernel would read (or, for out, write) past the view.
        key = ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16)
        info = parse_key(key)
        case = make_case(np.random.default_rng([SEED, 11]), info, 2, [20, 30])
        q, kv, rest = case["q"], case["kv_cache"], (case["block_tables"], case["seq_lens"])
        q_heads = np.broadcast_to(q[:, :1], q.shape)
        out_backing = np.full(q[:, :1].size * 4, 0xFFFF, dtype=np.uint16)
        out_heads = np.lib.stride_tricks.as_strided(out_backing[: q[:, :1].size], shape=q.shape,
                                                    strides=(q.shape[2] * 2, 0, 2))
        k_pages = np.broadcast_to(kv[:1, 0], kv[:, 0].shape)
        for name, call in (("q", lambda: ktune.xqa_decode(key, q_heads, kv, *rest)),
                           ("out", lambda: ktune.xqa_decode(key, q, kv, *rest, out=out_heads)),
                           ("k_cache", lambda: ktune.xqa_decode(key, q, (k_pages, kv[:, 1]), *rest))):
            with self.assertRaises(ktune.InvalidArgumentError) as cm:
                call()
            self.assertIn(f"xqa_decode: {name}: expected no stride of 0", str(cm.exception))
        self.assertTrue((out_backing == 0xFFFF).all(), "a refused call wrote into out's memory")

    @need_host
    def test_max_seq_len_takes_numpy_integers(self):
        key = ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16)
        info = parse_key(key)
        case = make_case(np.random.default_rng([SEED, 13]), info, 2, [20, 30])
        args = (key, case["q"], case["kv_cache"], case["block_tables"], case["seq_lens"])
        want = ktune.xqa_decode(*args, max_seq_len=32)
        np.testing.assert_array_equal(ktune.xqa_decode(*args, max_seq_len=np.int32(32)), want)
        np.testing.assert_array_equal(ktune.xqa_decode(*args, max_seq_len=np.int64(32)), want)
        for bad in (True, 32.0, np.int64(0)):
            with self.assertRaisesRegex(ktune.InvalidArgumentError, "max_seq_len: expected a positive int"):
                ktune.xqa_decode(*args, max_seq_len=bad)

    def test_read_only_outputs_are_refused(self):
        key = ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16, lse=True)
        info = parse_key(key)
        case = make_case(np.random.default_rng([SEED, 12]), info, 2, [20, 30])
        q, kv, rest = case["q"], case["kv_cache"], (case["block_tables"], case["seq_lens"])
        out = np.full(q.shape, 0xFFFF, dtype=np.uint16)
        lse = np.zeros(q.shape[:2], dtype=np.float32)
        for name, frozen in (("out", out), ("lse", lse)):
            frozen.flags.writeable = False
            with self.assertRaisesRegex(ktune.InvalidArgumentError, f"xqa_decode: {name}: expected a writeable array"):
                ktune.xqa_decode(key, q, kv, *rest, out=out, lse=lse)
            frozen.flags.writeable = True
        self.assertTrue((out == 0xFFFF).all() and not lse.any(), "a read-only output was written")


class Errors(unittest.TestCase):
    def test_bad_problem_json_names_the_field(self):
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.problem_key("xqa_decode", {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "pagesize": 3})
        self.assertIn("pagesize", str(c.exception))
        self.assertEqual(c.exception.status, 1)
        self.assertEqual(c.exception.status_name, "invalid_argument")
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, kv_dtype="int4")
        self.assertIn("kv_dtype", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.problem_key("xqa_decode", "d128.h32.oops")
        self.assertIn("d128.h32.oops", c.exception.message)

    def test_unknown_family_and_preset(self):
        with self.assertRaises(ktune.NotFoundError) as c:
            ktune.problem_key("no_such_family", "x")
        self.assertIn("no_such_family", c.exception.message)
        self.assertIn("xqa_decode", c.exception.message)  # lists the known families
        with self.assertRaises(ktune.NotFoundError) as c:
            ktune.warmup("no-such-model", arch="host", device=None)
        self.assertIn("no-such-model", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.warmup("llama-3.1-8b", arch="host", max_batch=-2, device=None)
        self.assertIn("max_batch", c.exception.message)

    def test_problem_keys_roundtrip(self):
        key = ktune.xqa_problem(head_dim=128, num_q_heads=32, num_kv_heads=8, page_size=32, max_q_len=4,
                                sinks=True, lse=True)
        self.assertEqual(ktune.problem_key("xqa_decode", key), key)
        info = parse_key(key)
        self.assertEqual((info.head_dim, info.num_q_heads, info.num_kv_heads, info.max_q_len, info.mask),
                         (128, 32, 8, 4, "causal"))
        self.assertTrue(info.sinks and info.lse and not info.softcap)
        self.assertIn("xqa_decode", ktune.families())
        self.assertIn("llama-3.1-8b", ktune.presets())

    def test_argument_errors_name_the_argument(self):
        key = ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16)
        info = parse_key(key)
        case = make_case(np.random.default_rng(SEED + 4), info, 2, [20, 33])
        args = (key, case["q"], case["kv_cache"], case["block_tables"], case["seq_lens"])

        def err(fn):
            with self.assertRaises(ktune.InvalidArgumentError) as c:
                fn()
            return c.exception.message

        self.assertIn("q:", err(lambda: ktune.xqa_decode(key, case["q"][:, :3], *args[2:])))
        self.assertIn("q:", err(lambda: ktune.xqa_decode(key, case["q"].astype(np.float32), *args[2:])))
        self.assertIn("kv_cache", err(lambda: ktune.xqa_decode(key, case["q"], case["kv_cache"][:, :, :1], *args[3:])))
        self.assertIn("seq_lens", err(lambda: ktune.xqa_decode(*args[:4], case["seq_lens"][:1])))
        self.assertIn("block_tables", err(lambda: ktune.xqa_decode(*args[:3], case["block_tables"].astype(np.int64),
                                                                   case["seq_lens"])))
        bad_bt = case["block_tables"].copy()
        bad_bt[0, 0] = 10_000
        self.assertIn("block_tables", err(lambda: ktune.xqa_decode(*args[:3], bad_bt, case["seq_lens"])))
        self.assertIn("seq_lens", err(lambda: ktune.xqa_decode(*args, max_seq_len=5)))
        self.assertIn("sinks", err(lambda: ktune.xqa_decode(*args, sinks=np.zeros(4, np.float32))))
        self.assertIn("max_seq_len", err(lambda: ktune.xqa_decode(*args, max_seq_len=-1)))

    def test_draft_tree_limits_and_mask_shapes(self):
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, max_q_len=65, mask="explicit")
        self.assertIn("max_q_len: expected 1..64, got 65", c.exception.message)
        key = ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16, max_q_len=64,
                                mask="explicit")
        self.assertIn(".q64.mask", key)
        info = parse_key(key)
        case = make_case(np.random.default_rng(SEED + 8), info, 2, [70, 64])
        self.assertEqual(case["mask"].shape, (128, 2))
        args = (key, case["q"], case["kv_cache"], case["block_tables"], case["seq_lens"])
        for bad in (case["mask"][:, 0].copy(), np.zeros((128, 2), np.uint16), np.zeros((128, 3), np.uint32)):
            with self.assertRaises(ktune.InvalidArgumentError) as c:
                ktune.xqa_decode(*args, mask=bad)
            self.assertIn("mask:", c.exception.message)
            self.assertIn("2 32-bit words per query row", c.exception.message)

    @need_host
    def test_library_validation_message_is_carried(self):
        # softcap on a problem compiled without it: refused by the library's own check (xqa_decode_validate)
        key = ktune.xqa_problem(head_dim=64, num_q_heads=4, num_kv_heads=2, page_size=16)
        case = make_case(np.random.default_rng(SEED + 5), parse_key(key), 1, [9])
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.xqa_decode(key, case["q"], case["kv_cache"], case["block_tables"], case["seq_lens"], softcap=5.0)
        self.assertIn("softcap", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.xqa_decode(key, case["q"], case["kv_cache"], case["block_tables"], case["seq_lens"],
                             config="t64.s3.w4")  # a CUDA config on the host
        self.assertIn("t64.s3.w4", str(c.exception))

    def test_library_not_found_names_the_paths(self):
        code = "import ktune\ntry:\n    ktune.version()\nexcept ktune.KtuneError as e:\n    print('ERR', e)\n"
        env = dict(os.environ, KTUNE_LIBRARY="/nonexistent/libktune.so")
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
        self.assertIn("ERR", r.stdout, r.stderr)
        self.assertIn("/nonexistent/libktune.so", r.stdout)
        self.assertIn("KTUNE_LIBRARY", r.stdout)


class WarmupHost(unittest.TestCase):
    @need_host
    def test_warmup_preset_on_host_then_resume(self):
        rt = ktune.Runtime(cache=os.path.join(_TMP.name, "warm.db"), allow_jit=True, read_only=False)
        seen = []
        r = ktune.warmup("llama-3.1-8b", arch="host", max_batch=2, max_seq_len=1024, device=None, runtime=rt, jobs=2,
                         progress=lambda what, done, total: seen.append((what, done, total)))
        compiles = [x for x in seen if x[0] == "compile"]
        self.assertTrue(compiles and compiles[-1][1] == compiles[-1][2] == r.compile_jobs, seen)
        self.assertEqual(sorted(x[0] for x in seen if x[0] != "compile"),
                         sorted(i["key"] for i in r.items if i["status"] == "tuned" or i["status"].startswith("failed")),
                         seen)  # one call per key measured
        self.assertEqual(r.failed, 0)
        self.assertEqual(r.compile_failed, 0)
        self.assertGreater(r.tuned, 0)
        self.assertTrue(all(i["arch"] == "host" for i in r.items), r.items)
        tuned = [i for i in r.items if i["status"] == "tuned"]
        self.assertEqual(len(tuned), r.tuned)
        self.assertTrue(all(i["winner"] for i in tuned))
        # a second warmup finds every key done; a launch in the tuned bucket uses the tuned config
        r2 = ktune.warmup("llama-3.1-8b", arch="host", max_batch=2, max_seq_len=1024, device=None, runtime=rt)
        self.assertEqual(r2.tuned, 0)
        self.assertEqual(r2.already_done, r.tuned)
        key = tuned[0]["key"].split("|")[0]
        bucket = tuned[0]["key"].split("|")[1]  # "b<batch>.l<seq_len>"
        b, l = (int(x[1:]) for x in bucket.split("."))
        plan = ktune.xqa_decode_plan(key, b, l, runtime=rt)
        self.assertEqual(plan["source"], "tuned", plan)
        self.assertEqual(plan["config"], tuned[0]["winner"])
        stats = rt.stats()
        self.assertGreaterEqual(stats["compiles"] + stats["cache_hits"], 1)

    @need_host
    def test_warmup_in_host_worker_processes(self):
        preset = os.path.join(_TMP.name, "workers.json")
        with open(preset, "w") as f:
            json.dump({"name": "workers", "description": "one xqa op",
                       "buckets": {"batch": {"min": 1, "max": 2}, "seq_len": {"min": 256, "max": 512}},
                       "ops": [{"label": "attn", "family": "xqa_decode",
                                "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8,
                                            "page_size": 32}}]}, f)
        rt = ktune.Runtime(cache=os.path.join(_TMP.name, "workers.db"), allow_jit=True, read_only=False)
        seen = []
        r = ktune.warmup(preset, arch="host", workers=2, runtime=rt,
                         progress=lambda what, done, total: seen.append(what))
        self.assertEqual((r.keys, r.tuned, r.failed), (4, 4, 0), r.items)
        self.assertTrue(all(i["device"] in (0, 1) for i in r.items if i["status"] == "tuned"), r.items)
        self.assertEqual(len([w for w in seen if w.startswith("[host ")]), 4, seen)  # "[host 1] 2/4 <key>"
        r2 = ktune.warmup(preset, arch="host", workers=2, runtime=rt, progress=False)
        self.assertEqual((r2.tuned, r2.already_done), (0, 4))
        # retune measures every key again, through the workers and in this process, and replaces its row
        r3 = ktune.warmup(preset, arch="host", workers=2, runtime=rt, progress=False, retune=True)
        self.assertEqual((r3.tuned, r3.already_done, r3.failed), (4, 0, 0), r3.items)
        r4 = ktune.warmup(preset, arch="host", runtime=rt, progress=False, retune=True)
        self.assertEqual((r4.tuned, r4.already_done, r4.failed), (4, 0, 0), r4.items)
        r5 = ktune.warmup(preset, arch="host", runtime=rt, progress=False)
        self.assertEqual((r5.tuned, r5.already_done), (0, 4))

    def test_warmup_devices_errors_name_the_argument(self):
        for bad in ("x", [0, 0], -1, [1.5], True):
            with self.assertRaises(ktune.InvalidArgumentError, msg=repr(bad)) as c:
                ktune.warmup("llama-3.1-8b", arch="host", devices=bad, progress=False)
            self.assertIn("devices", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.warmup("llama-3.1-8b", arch="host", workers=-1, progress=False)
        self.assertIn("workers", c.exception.message)
        with self.assertRaises(ktune.InvalidArgumentError) as c:
            ktune.warmup("llama-3.1-8b", arch="host", retune=1, progress=False)
        self.assertIn("retune", c.exception.message)


if __name__ == "__main__":
    unittest.main()
