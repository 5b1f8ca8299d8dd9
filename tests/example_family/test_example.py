"""example_scale from Python, against libktune_example.so (KTUNE_LIBRARY): the package knows the family by its
registration alone -- ktune.families() lists it, ktune.problem_key builds its keys through the family's one
schema (errors name the field), Runtime.compile builds it for sm_90a, ktune.warmup tunes a preset of it on the
host CPU, and a prepared op (ktune.ops.Op over ktune_op_prepare / ktune_op_run) runs it on the host device and on
a GPU when there is one. Run by python_example.sh."""

import ctypes
import json
import math
import os
import random
import sys
import tempfile
import threading
import unittest

import ktune
from ktune import _lib
from ktune.ops import Op

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python", "tests"))
from gating import skip_unless  # noqa: E402  (KTUNE_TEST_REQUIRE, as the package's own tests)

FAMILY = "example_scale"
HOST_DEVICE = -1  # KTUNE_HOST_DEVICE


class CArgs(ctypes.Structure):
    """ktune::example::CArgs (tests/example_family/scale.hpp)."""
    _fields_ = [("struct_size", ctypes.c_uint32), ("family_id", ctypes.c_uint32), ("x", ctypes.c_void_p),
                ("out", ctypes.c_void_p), ("rows", ctypes.c_int64), ("alpha", ctypes.c_float),
                ("config", ctypes.c_char_p)]


def c_args(**fields) -> CArgs:
    a = CArgs(ctypes.sizeof(CArgs), _lib.lib().ktune_family_id(FAMILY.encode()))
    for k, v in fields.items():
        setattr(a, k, v)
    return a


def cuda_available() -> bool:
    try:
        import torch
        return torch.cuda.is_available()
    except ImportError:
        return False


def host_available() -> bool:
    return os.path.exists(os.path.join(os.path.dirname(ktune.library_path()), "libktune_host.so"))


class ExampleFamilyTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        _lib.lib().ktune_family_id.argtypes = [ctypes.c_char_p]
        _lib.lib().ktune_family_id.restype = ctypes.c_uint32
        cls.tmp = tempfile.TemporaryDirectory()
        cls.rt = ktune.Runtime(cache=os.path.join(cls.tmp.name, "py.db"))

    @classmethod
    def tearDownClass(cls):
        cls.rt.close()
        cls.tmp.cleanup()

    def test_listed_and_keys_from_the_one_schema(self):
        self.assertIn(FAMILY, ktune.families())
        self.assertEqual(ktune.problem_key(FAMILY, {"cols": 4096, "dtype": "bf16"}), "c4096.bf16")
        self.assertEqual(ktune.problem_key(FAMILY, "c64.f32"), "c64.f32")
        with self.assertRaises(ktune.InvalidArgumentError) as e:
            ktune.problem_key(FAMILY, {"cols": 8, "dtype": "fp16"})
        self.assertIn('dtype: expected one of "f32", "bf16", got "fp16"', str(e.exception))
        with self.assertRaises(ktune.InvalidArgumentError) as e:
            ktune.problem_key(FAMILY, {"rows": 8})
        self.assertIn("rows: unknown field (expected one of cols, dtype)", str(e.exception))

    def test_compiles_for_sm90a_then_hits_the_cache(self):
        self.assertTrue(self.rt.compile(FAMILY, {"cols": 1024, "dtype": "bf16"}, "sm_90a"))
        self.assertFalse(self.rt.compile(FAMILY, {"cols": 1024, "dtype": "bf16"}, "sm_90a"))

    def test_op_refuses_a_struct_of_another_family(self):
        op = Op(FAMILY, {"cols": 64}, self.rt)
        a = c_args(rows=2)
        a.family_id = 7
        with self.assertRaises(ktune.InvalidArgumentError) as e:
            op.run(ctypes.byref(a))
        self.assertIn("args.family_id", str(e.exception))
        plan = op.plan(ctypes.byref(c_args(rows=9, config=b"t128.v2")))
        self.assertEqual((plan["config"], plan["source"], plan["num_splits"]), ("t128.v2", "forced", 1))
        op.close()

    @skip_unless("host", host_available(), "the LLVM host backend (libktune_host.so) is not built")
    def test_host_op_warmup_and_tuned_plan(self):
        cols, rows, alpha = 64, 3, -2.0
        rng = random.Random()
        xs = [rng.choice((-1.0, 1.0)) * rng.uniform(0.25, 8.0) for _ in range(rows * cols)]  # never 0
        x = (ctypes.c_float * len(xs))(*xs)
        out = (ctypes.c_float * len(xs))(*([math.nan] * len(xs)))  # an unwritten element stays NaN
        op = Op(FAMILY, {"cols": cols}, self.rt)
        a = c_args(x=ctypes.addressof(x), out=ctypes.addressof(out), rows=rows, alpha=alpha)
        errors = []

        def on_host():  # the host device is per thread
            try:
                _lib.check(_lib.lib().ktune_use_device(HOST_DEVICE), "ktune_use_device")
                op.run(ctypes.byref(a))
            except Exception as exc:  # reported on the main thread
                errors.append(exc)
        t = threading.Thread(target=on_host)
        t.start()
        t.join()
        self.assertEqual(errors, [])
        self.assertEqual(list(out), [alpha * v for v in x])  # x: the float32 inputs; times 2 is exact
        op.close()

        preset = os.path.join(self.tmp.name, "scale.json")
        with open(preset, "w") as f:
            json.dump({"name": "scale-only", "buckets": {"batch": {"min": 1, "max": 2}, "seq_len": {"min": 1, "max": 1}},
                       "ops": [{"label": "scale", "family": FAMILY, "problem": {"cols": cols}}]}, f)
        r = ktune.warmup(preset, arch="host", runtime=self.rt, progress=False)
        self.assertEqual(r.tuned, 2)
        self.assertEqual(r.failed, 0)
        self.assertEqual({item["key"] for item in r.items}, {"c64.f32|m1", "c64.f32|m2"})

    @skip_unless("gpu", cuda_available(), "no torch with a CUDA device")
    def test_gpu_op_on_torch_tensors(self):
        import torch
        ktune.ensure_device(torch.cuda.current_device())
        x = torch.randn(33, 4096, device="cuda", dtype=torch.bfloat16)
        out = torch.empty_like(x)
        op = Op(FAMILY, {"cols": 4096, "dtype": "bf16"}, self.rt)
        a = c_args(x=x.data_ptr(), out=out.data_ptr(), rows=33, alpha=0.75)
        op.run(ctypes.byref(a), torch.cuda.current_stream().cuda_stream)
        torch.cuda.synchronize()
        self.assertTrue(torch.equal(out, (x.float() * 0.75).to(torch.bfloat16)))
        self.assertEqual(op.plan(ctypes.byref(a))["source"], "default")
        op.close()


if __name__ == "__main__":
    unittest.main(verbosity=2)
