"""The argument checks of the torch wrappers and custom ops (ktune.torch_ops, ktune.torch_families) and of
DecodePlan without torch or a GPU: the modules imported over fake_torch (fake_torch_ops.installed), with the step
before each launch replaced, so a call either is refused naming the argument or reaches that step (Launched)."""

import contextlib
import ctypes
import gc
import math
import os
import sys
import tempfile
import threading
import unittest
import weakref

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_torch as ft  # noqa: E402
import fake_torch_ops  # noqa: E402
from fake_torch_ops import Launched  # noqa: E402

import ktune  # noqa: E402
from ktune import mxfp4  # noqa: E402
from ktune.errors import InvalidArgumentError  # noqa: E402

DEV = "cuda:0"
XQA_KEY = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none"


class RecordingOp:
    """The C op's part of an XqaDecodeOp: records each launch's softmax_scale; plans no workspace."""

    def __init__(self):
        self._handle = ctypes.c_void_p(1)
        self.scales = []

    def _run_on_device(self, handle, ref, stream, device):
        self.scales.append(ref._obj.softmax_scale)
        return 0

    def plan(self, ref):
        return {"workspace_bytes": 0}


def _real_torch():
    try:
        import torch  # noqa: F401
        return True
    except ImportError:
        return False


@unittest.skipIf(_real_torch(), "a real torch is installed: these checks run against it in test_torch")
class FakeTorchCase(unittest.TestCase):
    def setUp(self):
        stack = contextlib.ExitStack()
        self.addCleanup(stack.close)
        self.torch_ops, self.families = stack.enter_context(fake_torch_ops.installed())
        self.families._ensure_device = fake_torch_ops.launched


class XqaSoftmaxScale(FakeTorchCase):
    """softmax_scale=None means 1/sqrt(head_dim); any given value must be finite and > 0, as on the NumPy path
    and in the library. The custom op's float carries "not given" as exactly -1.0."""

    def setUp(self):
        super().setUp()
        self.rec = RecordingOp()
        op = ktune.ops.XqaDecodeOp._unprepared(XQA_KEY, self.rec, ft, lambda index: 0)
        self.torch_ops.prepared_op = lambda key: op
        self.t = (ft.empty(2, 32, 128, dtype=ft.bfloat16, device=DEV),
                  ft.empty(8, 2, 8, 32, 128, dtype=ft.bfloat16, device=DEV),
                  ft.empty(2, 4, dtype=ft.int32, device=DEV), ft.empty(2, dtype=ft.int32, device=DEV))

    def wrapper(self, scale):
        return self.torch_ops.xqa_decode(XQA_KEY, *self.t, max_seq_len=128, softmax_scale=scale)

    def raw_op(self, scale):
        q, kv, bt, sl = self.t
        return sys.modules["torch"].ops.ktune.xqa_decode(q, kv, bt, sl, None, None, None, XQA_KEY, 128, scale, 1.0,
                                                         1.0, 1.0, 1.0, 0.0, -1, 0, "", None, None, None, None, None,
                                                         None)

    def test_bad_scales_are_refused_not_replaced_by_the_default_and_good_ones_launch(self):
        for bad in (-0.125, -1.0, 0.0, float("inf"), float("nan")):
            with self.subTest(scale=bad):
                with self.assertRaisesRegex(InvalidArgumentError,
                                            r"xqa_decode: softmax_scale: expected a finite value > 0, got"):
                    self.wrapper(bad)
        for bad in (-0.125, -2.0, 0.0, float("nan")):
            with self.subTest(raw_scale=bad):
                with self.assertRaisesRegex(InvalidArgumentError, r"softmax_scale: expected a finite value > 0"):
                    self.raw_op(bad)
        self.assertEqual(self.rec.scales, [])
        self.wrapper(None)
        self.wrapper(0.5)
        self.raw_op(-1.0)  # the custom op's "not given"
        self.assertEqual(len(self.rec.scales), 3)
        for got, want in zip(self.rec.scales, (1 / math.sqrt(128), 0.5, 1 / math.sqrt(128))):
            self.assertAlmostEqual(got, want, places=6)


class MlaSoftmaxScale(FakeTorchCase):
    def call(self, scale):
        key = ktune.mla_problem(num_heads=16, kv_lora_rank=512, rope_dim=64, topk=128, page_size=64,
                                kv_dtype="fp8_ds_mla")
        return self.families.sparse_mla_decode(key, ft.empty(2, 16, 576, dtype=ft.bfloat16, device=DEV),
                                               ft.empty(4, 64, 656, dtype=ft.uint8, device=DEV),
                                               ft.empty(2, 128, dtype=ft.int32, device=DEV), softmax_scale=scale)

    def test_bad_scales_are_refused_before_the_device_and_good_ones_pass(self):
        for bad in (-0.1, -1.0, 0.0, float("inf")):
            with self.subTest(scale=bad):
                with self.assertRaisesRegex(InvalidArgumentError,
                                            r"sparse_mla_decode: softmax_scale: expected a finite value > 0, got"):
                    self.call(bad)
        for ok in (None, 0.07):
            with self.assertRaises(Launched):
                self.call(ok)

    def test_a_tensor_on_another_cuda_device_is_named(self):
        key = ktune.mla_problem(num_heads=16, kv_lora_rank=512, rope_dim=64, topk=128, page_size=64,
                                kv_dtype="fp8_ds_mla")
        with self.assertRaisesRegex(InvalidArgumentError,
                                    r"sparse_mla_decode: kv_cache: expected the device of q \(cuda:0\), got cuda:1"):
            self.families.sparse_mla_decode(key, ft.empty(2, 16, 576, dtype=ft.bfloat16, device=DEV),
                                            ft.empty(4, 64, 656, dtype=ft.uint8, device="cuda:1"),
                                            ft.empty(2, 128, dtype=ft.int32, device=DEV))


@unittest.skipUnless("mxfp4_gemm" in ktune.families(), "this libktune has no mxfp4_gemm family")
class Mxfp4Arguments(FakeTorchCase):
    GROUPED = dict(n=256, k=1024, num_experts=8, top_k=2)

    def weight(self, n, k, e):
        wb, sb = mxfp4.packed_bytes(n, k, e)
        return mxfp4.Mxfp4Weight(n, k, e, ft.empty(wb, dtype=ft.uint8, device=DEV),
                                 ft.empty(sb, dtype=ft.uint8, device=DEV), mxfp4.layout_version())

    def call(self, fields, weight=None, bias=None):
        key = ktune.mxfp4_problem(**fields)
        n, k, e = fields["n"], fields["k"], fields.get("num_experts", 1)
        offsets = ft.empty(e + 1, dtype=ft.int32, device=DEV) if e > 1 else None
        return self.families.mxfp4_gemm(key, ft.empty(4, k, dtype=ft.bfloat16, device=DEV),
                                        weight if weight is not None else self.weight(n, k, e), bias=bias,
                                        expert_offsets=offsets)

    def test_grouped_problem_refuses_a_bias_of_one_row(self):
        # the kernels read bias[expert * n + col]: a [n] bias would be read past its end for experts >= 1
        with self.assertRaisesRegex(InvalidArgumentError, r"mxfp4_gemm: bias: expected shape \[8, 256\]"):
            self.call(self.GROUPED, bias=ft.empty(256, dtype=ft.bfloat16, device=DEV))
        with self.assertRaises(Launched):
            self.call(self.GROUPED, bias=ft.empty(8, 256, dtype=ft.bfloat16, device=DEV))
        dense = dict(n=256, k=512)  # one expert: [n] or [1, n]
        for shape in ((256,), (1, 256)):
            with self.assertRaises(Launched):
                self.call(dense, bias=ft.empty(*shape, dtype=ft.bfloat16, device=DEV))
        with self.assertRaisesRegex(InvalidArgumentError, r"mxfp4_gemm: bias: expected shape"):
            self.call(dense, bias=ft.empty(2, 256, dtype=ft.bfloat16, device=DEV))

    def test_a_weight_of_another_shape_with_the_same_bytes_is_refused(self):
        self.assertEqual(mxfp4.packed_bytes(256, 1024, 8), mxfp4.packed_bytes(1024, 256, 8))
        self.assertEqual(mxfp4.packed_bytes(256, 1024, 8), mxfp4.packed_bytes(512, 512, 8))
        for n, k, e in ((1024, 256, 8), (512, 512, 8)):
            with self.subTest(weight=(n, k, e)):
                with self.assertRaisesRegex(InvalidArgumentError,
                                            r"mxfp4_gemm: weight: expected n, k, num_experts = 256, 1024, 8 "
                                            rf"\(the problem's\), got {n}, {k}, {e}"):
                    self.call(self.GROUPED, weight=self.weight(n, k, e))
        with self.assertRaisesRegex(InvalidArgumentError, r"mxfp4_gemm: weight: expected a ktune.mxfp4.Mxfp4Weight"):
            self.call(self.GROUPED, weight=(1, 2))
        with self.assertRaises(Launched):
            self.call(self.GROUPED)

    def test_a_tensor_on_another_cuda_device_is_named(self):
        with self.assertRaisesRegex(InvalidArgumentError,
                                    r"mxfp4_gemm: bias: expected the device of a \(cuda:0\), got cuda:1"):
            self.call(self.GROUPED, bias=ft.empty(8, 256, dtype=ft.bfloat16, device="cuda:1"))


class DecodePlanRuntime(FakeTorchCase):
    """A DecodePlan made from an xqa_decode ops.Op runs on that op's runtime (its cache and JIT policy), not the
    default one."""

    def test_plan_op_is_built_on_the_given_ops_runtime(self):
        from ktune import ops
        tmp = tempfile.TemporaryDirectory(prefix="ktune-plan-rt-")
        self.addCleanup(tmp.cleanup)
        rt = ktune.Runtime(cache=os.path.join(tmp.name, "ktune.db"), read_only=False, allow_jit=False)
        self.addCleanup(rt.close)
        op = ops.Op("xqa_decode", XQA_KEY, rt)
        self.assertIsNot(rt, ktune.runtime())
        built = []
        init = ops.XqaDecodeOp.__init__

        def spy(self_, problem, rt_=None):  # the real op, then stop: no device here to allocate the buffers on
            init(self_, problem, rt_)
            built.append(self_)
            raise Launched()

        ops.XqaDecodeOp.__init__ = spy
        self.addCleanup(setattr, ops.XqaDecodeOp, "__init__", init)
        with self.assertRaises(Launched):
            ktune.DecodePlan(op, batch=2, max_seq_len=128, max_pages_per_req=4, device=DEV)
        self.assertEqual(len(built), 1)
        self.assertIs(built[0]._op.runtime, rt)


class OpCachesFollowTheDefaultRuntime(FakeTorchCase):
    """The torch ops' per-thread caches (prepared XqaDecodeOps, workspace sizes) hold the default runtime's only:
    the first op call after set_runtime(new), on any thread, empties every thread's caches of the old runtime, so
    the old one is freed once nothing else holds it. Real ops (ktune_op_prepare) over fake_torch: nothing launches."""

    def setUp(self):
        super().setUp()
        tmp = tempfile.TemporaryDirectory(prefix="ktune-op-caches-")
        self.addCleanup(tmp.cleanup)
        self.dir = tmp.name
        self.addCleanup(ktune.set_runtime, ktune.runtime())

    def runtime(self, name):
        return ktune.Runtime(cache=os.path.join(self.dir, name), allow_jit=False)

    def test_a_replaced_runtime_is_not_kept_alive(self):
        old = self.runtime("old.db")
        ktune.set_runtime(old)
        mine = self.torch_ops.prepared_op(XQA_KEY)
        self.assertIs(self.torch_ops.prepared_op(XQA_KEY), mine)
        # another thread makes its own op on the old runtime, then stays alive without calling again
        made, go_on, seen = threading.Event(), threading.Event(), []

        def other_thread():
            op = self.torch_ops.prepared_op(XQA_KEY)
            seen.append(op is not mine and op._op.runtime is ktune.runtime())
            del op
            made.set()
            go_on.wait(60)
            seen.append(self.torch_ops.prepared_op(XQA_KEY)._op.runtime is ktune.runtime())

        t = threading.Thread(target=other_thread)
        t.start()
        self.addCleanup(t.join)
        self.addCleanup(go_on.set)
        self.assertTrue(made.wait(60))
        gone = weakref.ref(old)
        del old, mine
        ktune.set_runtime(self.runtime("new.db"))
        self.assertIs(self.torch_ops.prepared_op(XQA_KEY)._op.runtime, ktune.runtime())
        gc.collect()
        self.assertIsNone(gone(), "the replaced runtime is still held by the op caches")
        go_on.set()
        t.join(60)
        self.assertEqual(seen, [True, True])  # its own op each time, on the default runtime of the moment

    def test_workspace_sizes_are_bounded_and_kept_per_runtime(self):
        rt = self.runtime("ws.db")
        ktune.set_runtime(rt)
        caches = self.torch_ops.runtime_caches(rt)
        self.assertIs(self.torch_ops.runtime_caches(rt), caches)
        cap = caches.WORKSPACE_SIZES
        shape = lambda T: ("mla", 0, XQA_KEY, T, None, 0)  # noqa: E731
        for T in range(cap + 50):  # an eager engine: a new num_tokens at many steps
            caches.remember_workspace(shape(T), 1024 * T)
        self.assertEqual(len(caches.workspace), cap)
        self.assertNotIn(shape(0), caches.workspace)  # the oldest went first
        self.assertEqual(caches.workspace[shape(cap + 49)], 1024 * (cap + 49))
        other = self.runtime("ws2.db")
        ktune.set_runtime(other)
        self.assertEqual(self.torch_ops.runtime_caches(other).workspace, {})
        self.assertEqual(caches.workspace, {})  # emptied: its runtime is no longer the default


if __name__ == "__main__":
    unittest.main()
