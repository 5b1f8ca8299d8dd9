"""The argument checks of the torch wrappers and custom ops (ktune.torch_ops, ktune.torch_families) and of
DecodePlan without torch or a GPU: the modules imported over fake_torch (fake_torch_ops.installed), with the step
before each launch replaced, so a call either is refused naming the argument or reaches that step (Launched)."""

import contextlib
import ctypes
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fake_torch as ft  # noqa: E402
import fake_torch_ops  # noqa: E402
from fake_torch_ops import Launched  # noqa: E402

import ktune  # noqa: E402
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

    def test_bad_scales_are_refused_not_replaced_by_the_default(self):
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

    def test_default_and_given_scales_launch(self):
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

    def test_bad_scales_are_refused_before_the_device(self):
        for bad in (-0.1, -1.0, 0.0, float("inf")):
            with self.subTest(scale=bad):
                with self.assertRaisesRegex(InvalidArgumentError,
                                            r"sparse_mla_decode: softmax_scale: expected a finite value > 0, got"):
                    self.call(bad)

    def test_default_and_given_scales_pass_the_checks(self):
        for ok in (None, 0.07):
            with self.assertRaises(Launched):
                self.call(ok)


if __name__ == "__main__":
    unittest.main()
