"""XqaDecodeOp's per-call checks without torch or a GPU: the op's Python side over fake_torch tensors and a
recording stand-in for the C op (XqaDecodeOp._unprepared). A call whose facts equal the last call's skips the
full check, so these tests change one tensor object in place (resize_, as_strided_, set_, the .data setter)
between calls and expect the change to be refused before anything launches."""

import ctypes
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
import fake_torch as ft  # noqa: E402

from ktune.errors import InvalidArgumentError  # noqa: E402
from ktune.ops import XqaDecodeOp  # noqa: E402

KEY = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none"
KEY_SINK_LSE = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q1.none.sink.lse"
DEV = "cuda:0"


class RecordingOp:
    """The C op's part: records each launch's argument struct; plans `workspace_bytes`."""

    def __init__(self, workspace_bytes=0):
        self._handle = ctypes.c_void_p(1)
        self.workspace_bytes = workspace_bytes
        self.launches = []

    def _run_on_device(self, handle, ref, stream, device):
        a = ref._obj
        self.launches.append({name: getattr(a, name) for name, _ in a._fields_})
        return 0

    def plan(self, ref):
        return {"workspace_bytes": self.workspace_bytes}


def make_op(key=KEY, workspace_bytes=0):
    rec = RecordingOp(workspace_bytes)
    return XqaDecodeOp._unprepared(key, rec, ft, lambda index: 0), rec


def tensors(batch=2, pages_per_req=4):
    pages = batch * pages_per_req
    return dict(q=ft.empty(batch, 32, 128, dtype=ft.bfloat16, device=DEV),
                kv=ft.empty(pages, 2, 8, 32, 128, dtype=ft.bfloat16, device=DEV),
                bt=ft.empty(batch, pages_per_req, dtype=ft.int32, device=DEV),
                sl=ft.empty(batch, dtype=ft.int32, device=DEV),
                out=ft.empty(batch, 32, 128, dtype=ft.bfloat16, device=DEV))


class SameObjectChangedInPlace(unittest.TestCase):
    def setUp(self):
        self.op, self.rec = make_op()
        self.t = tensors()

    def call(self, **kw):
        t = self.t
        args = dict(max_seq_len=128, out=t["out"])
        args.update(kw)
        return self.op(t["q"], args.pop("kv", t["kv"]), t["bt"], t["sl"], **args)

    def refused(self, regex, **kw):
        before = len(self.rec.launches)
        with self.assertRaisesRegex(InvalidArgumentError, regex):
            self.call(**kw)
        self.assertEqual(len(self.rec.launches), before, "a refused call launched")

    def test_first_and_repeated_calls_launch_with_the_call_fields(self):
        self.call()
        self.call()
        self.assertEqual(len(self.rec.launches), 2)
        for a in self.rec.launches:
            self.assertEqual((a["batch"], a["num_tokens"], a["max_pages_per_req"], a["num_pages"]), (2, 2, 4, 8))
            self.assertEqual(a["q"], self.t["q"].data_ptr())
            self.assertEqual(a["kv_cache"], self.t["kv"].data_ptr())
            self.assertAlmostEqual(a["softmax_scale"], 1 / math.sqrt(128), places=6)

    def test_resize_of_the_cache_is_refused(self):
        self.call()
        self.t["kv"].resize_(8, 2, 8, 16, 128)
        self.refused(r"kv_cache: expected shape")

    def test_as_strided_cache_is_refused(self):
        self.call()
        kv = self.t["kv"]
        st = list(kv.stride())
        st[3], st[4] = 1, 32  # page rows no longer dense
        kv.as_strided_(kv.shape, st)
        self.refused(r"kv_cache: expected a C-contiguous")

    def test_set_block_tables_to_another_dtype_is_refused(self):
        self.call()
        self.t["bt"].set_(ft.empty(2, 4, dtype=ft.int16, device=DEV))
        self.refused(r"block_tables: expected dtype i32")

    def test_strided_seq_lens_is_refused(self):
        self.call()
        sl = self.t["sl"]
        sl.as_strided_(sl.shape, (2,))
        self.refused(r"seq_lens: expected a C-contiguous")

    def test_cache_moved_to_another_device_by_data_setter_is_refused(self):
        self.call()
        self.t["kv"].data = self.t["kv"].to("cpu")
        self.refused(r"one device")

    def test_q_reinterpreted_as_another_dtype_is_refused(self):
        self.call()
        q = self.t["q"]
        q.data = q.view(ft.float16)  # same address, shape and strides
        self.refused(r"q: expected dtype")

    def test_out_with_a_strided_head_dim_is_refused(self):
        self.call()
        out = self.t["out"]
        out.as_strided_(out.shape, (32 * 256, 256, 2))
        self.refused(r"out: expected the last dimension \(head_dim\) contiguous")

    def test_out_broadcast_over_heads_is_refused(self):
        # A stride of 0 would reach the library as "dense": 32 heads written where the view holds one.
        self.call()
        out = self.t["out"]
        out.as_strided_(out.shape, (128, 0, 1))
        self.refused(r"out: expected no stride of 0")

    def test_q_expanded_over_heads_is_refused(self):
        self.t["q"] = ft.empty(2, 1, 128, dtype=ft.bfloat16, device=DEV).expand(2, 32, 128)
        self.refused(r"q: expected no stride of 0")

    def test_a_valid_change_of_the_same_object_is_accepted_with_its_new_fields(self):
        self.call()
        self.t["kv"].set_(ft.empty(16, 2, 8, 32, 128, dtype=ft.bfloat16, device=DEV))
        self.call()
        self.assertEqual(self.rec.launches[-1]["num_pages"], 16)
        self.assertEqual(self.rec.launches[-1]["kv_cache"], self.t["kv"].data_ptr())

    def test_refused_then_repaired_runs_again(self):
        self.call()
        sl = self.t["sl"]
        sl.as_strided_(sl.shape, (2,))
        self.refused(r"seq_lens")
        sl.as_strided_(sl.shape, (1,))
        self.call()
        self.assertEqual(len(self.rec.launches), 2)

    def test_max_seq_len_of_another_type_is_checked(self):
        self.call(max_seq_len=1)
        self.refused(r"max_seq_len: expected a positive int", max_seq_len=True)
        self.refused(r"max_seq_len: expected a positive int", max_seq_len=[1])

    def test_k_v_pair_changed_in_place_is_refused(self):
        k = ft.empty(8, 8, 32, 128, dtype=ft.bfloat16, device=DEV)
        v = ft.empty(8, 8, 32, 128, dtype=ft.bfloat16, device=DEV)
        self.call(kv=(k, v))
        self.assertEqual(self.rec.launches[-1]["v_cache"], v.data_ptr())
        v.as_strided_(v.shape, (2 * 8 * 32 * 128, 32 * 128, 128, 1))  # another page stride than k's
        self.refused(r"v_cache: expected the page stride of k_cache", kv=(k, v))
        v.resize_(8, 8, 32, 128)
        self.call(kv=(k, v))
        v.data = v.to("cpu")
        self.refused(r"one device", kv=(k, v))

    def test_scale_tensor_changed_in_place_is_refused(self):
        s = ft.empty(1, dtype=ft.float32, device=DEV)
        self.call(k_scale=s)
        self.assertEqual(self.rec.launches[-1]["k_scale_ptr"], s.data_ptr())
        s.set_(ft.empty(1, dtype=ft.float16, device=DEV))
        self.refused(r"k_scale: expected a number or a float32 array of one element", k_scale=s)
        s.set_(ft.empty(2, dtype=ft.float32, device=DEV))
        self.refused(r"k_scale: expected a number or a float32", k_scale=s)
        s.set_(ft.empty(1, dtype=ft.float32, device="cpu"))
        self.refused(r"one device", k_scale=s)

    def test_a_non_tensor_where_a_tensor_was_is_named(self):
        self.call()
        with self.assertRaisesRegex(InvalidArgumentError, r"block_tables: expected a torch.Tensor"):
            self.op(self.t["q"], self.t["kv"], [[0, 1, 2, 3], [4, 5, 6, 7]], self.t["sl"], max_seq_len=128,
                    out=self.t["out"])
        with self.assertRaisesRegex(InvalidArgumentError, r"seq_lens: expected"):
            self.op(self.t["q"], self.t["kv"], self.t["bt"], None, max_seq_len=128, out=self.t["out"])


class OptionalTensorsChangedInPlace(unittest.TestCase):
    def setUp(self):
        self.op, self.rec = make_op(KEY_SINK_LSE)
        t = self.t = tensors()
        t["sinks"] = ft.empty(32, dtype=ft.float32, device=DEV)
        t["lse"] = ft.empty(2, 32, dtype=ft.float32, device=DEV)

    def call(self):
        t = self.t
        self.op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=128, out=t["out"], lse=t["lse"], sinks=t["sinks"])

    def test_sinks_moved_to_the_host_are_refused(self):
        self.call()
        self.t["sinks"].data = self.t["sinks"].to("cpu")
        with self.assertRaisesRegex(InvalidArgumentError, r"one device"):
            self.call()
        self.assertEqual(len(self.rec.launches), 1)

    def test_strided_lse_is_refused(self):
        self.call()
        self.t["lse"].as_strided_((2, 32), (64, 2))
        with self.assertRaisesRegex(InvalidArgumentError, r"lse: expected a C-contiguous"):
            self.call()
        self.assertEqual(len(self.rec.launches), 1)


class MaskForms(unittest.TestCase):
    """uint16 mask pairs: [num_tokens, 2W] in either form, [batch, q_len_per_req, 2W] in the uniform form only.
    The kernel reads one mask row per query token, so a 3-d [batch, 1, 2W] mask of a ragged call would be read
    past its end."""

    KEY_MASK = "d128.h32.kv8.p32.hnd.bf16-bf16-bf16.q4.mask"

    def setUp(self):
        self.op, self.rec = make_op(self.KEY_MASK)
        self.t = tensors()
        self.t["q"] = ft.empty(8, 32, 128, dtype=ft.bfloat16, device=DEV)  # 2 requests x 4 tokens
        self.t["out"] = ft.empty(8, 32, 128, dtype=ft.bfloat16, device=DEV)
        self.cu = ft.empty(3, dtype=ft.int32, device=DEV)

    def call(self, mask, ragged):
        t = self.t
        self.op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=128, out=t["out"], mask=mask,
                q_cu_seq_lens=self.cu if ragged else None)

    def test_ragged_call_refuses_a_3d_mask_and_takes_the_row_forms(self):
        with self.assertRaisesRegex(InvalidArgumentError, r"mask: expected uint16 pairs \[num_tokens, 2\] = \[8, 2\] "
                                                          r"in the ragged form .* got \[2, 1, 2\]"):
            self.call(ft.empty(2, 1, 2, dtype=ft.uint16, device=DEV), ragged=True)
        with self.assertRaisesRegex(InvalidArgumentError, r"mask: .*ragged form"):
            self.call(ft.empty(8, 1, 2, dtype=ft.uint16, device=DEV), ragged=True)
        self.assertEqual(self.rec.launches, [])
        # the forms that hold a row per query token
        self.call(ft.empty(8, 2, dtype=ft.uint16, device=DEV), ragged=True)
        self.call(ft.empty(8, 2, dtype=ft.uint16, device=DEV), ragged=False)
        self.call(ft.empty(2, 4, 2, dtype=ft.uint16, device=DEV), ragged=False)
        self.assertEqual([a["q_len_per_req"] for a in self.rec.launches], [1, 4, 4])


class Workspace(unittest.TestCase):
    def setUp(self):
        self.op, self.rec = make_op(workspace_bytes=4096)
        self.t = tensors()

    def call(self, ws):
        t = self.t
        self.op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=128, out=t["out"], workspace=ws)

    def test_workspace_checks_hold_for_the_same_object(self):
        ws = ft.empty(4096, dtype=ft.uint8, device=DEV)
        self.call(ws)
        self.assertEqual((self.rec.launches[-1]["workspace"], self.rec.launches[-1]["workspace_bytes"]),
                         (ws.data_ptr(), 4096))
        ws.resize_(1024)
        with self.assertRaisesRegex(InvalidArgumentError, r"workspace: expected a contiguous tensor of >= 4096"):
            self.call(ws)
        ws.set_(ft.empty(4096, dtype=ft.uint8, device="cpu"))
        with self.assertRaisesRegex(InvalidArgumentError, r"workspace: expected .* on cuda"):
            self.call(ws)
        self.assertEqual(len(self.rec.launches), 1)

    def test_an_expanded_workspace_is_refused(self):
        # 4096 elements over one byte of memory: the kernel would write past it
        with self.assertRaisesRegex(InvalidArgumentError, r"not contiguous"):
            self.call(ft.empty(1, dtype=ft.uint8, device=DEV).expand(4096))
        self.assertEqual(self.rec.launches, [])

    def test_a_given_workspace_is_passed_when_unsplit_and_serves_a_later_split(self):
        # the memo says "unsplit" for these facts; the library plans a split later (a config tuned in this
        # process) and then refuses a call without enough workspace, as the C op does
        import ktune._lib as lib
        op, rec = make_op(workspace_bytes=0)
        t = tensors()
        recorded, need = rec._run_on_device, [0]

        def refusing(handle, ref, stream, device):
            a = ref._obj
            if need[0] and (not a.workspace or a.workspace_bytes < need[0]):
                return 1
            return recorded(handle, ref, stream, device)

        rec._run_on_device = refusing
        saved = lib.last_error
        lib.last_error = lambda: "ktune xqa_decode: workspace: expected a device pointer of >= N bytes, got null"
        self.addCleanup(setattr, lib, "last_error", saved)

        def call(ws):
            op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=128, out=t["out"], workspace=ws)

        ws = ft.empty(1 << 20, dtype=ft.uint8, device=DEV)
        call(ws)
        self.assertEqual((rec.launches[-1]["workspace"], rec.launches[-1]["workspace_bytes"]),
                         (ws.data_ptr(), 1 << 20))
        need[0] = rec.workspace_bytes = 4096
        call(ws)
        call(ws)
        self.assertEqual(len(rec.launches), 3)
        self.assertEqual(rec.launches[-1]["workspace"], ws.data_ptr())
        # a plan that outgrows the buffer: planned afresh once, then refused naming the size it needs
        need[0] = rec.workspace_bytes = 2 << 20
        with self.assertRaisesRegex(InvalidArgumentError, r"workspace: expected a contiguous tensor of >= 2097152 "
                                                          r"bytes on cuda:0, got 1048576 bytes"):
            call(ws)
        self.assertEqual(len(rec.launches), 3)
        big = ft.empty(2 << 20, dtype=ft.uint8, device=DEV)
        call(big)  # and the op is not stuck: the next call with a large enough buffer runs
        self.assertEqual(rec.launches[-1]["workspace"], big.data_ptr())
        with self.assertRaisesRegex(InvalidArgumentError, r"workspace: expected a contiguous tensor .* on cuda:0, got "
                                                          r"2097152 bytes on cpu"):
            call(ft.empty(2 << 20, dtype=ft.uint8, device="cpu"))

    def test_without_workspace_one_is_allocated_on_q_device(self):
        self.call(None)
        self.assertNotEqual(self.rec.launches[-1]["workspace"], None)


class IntFields(unittest.TestCase):
    def test_values_past_32_bits_are_refused_not_wrapped(self):
        op, rec = make_op()
        t = tensors()
        for kw, field in ((dict(window_left=2**32 + 3), "window_left"), (dict(num_splits=2**32 + 1), "num_splits"),
                          (dict(max_seq_len=2**32 + 128), "max_seq_len")):
            args = dict(max_seq_len=128, out=t["out"])
            args.update(kw)
            with self.assertRaisesRegex(InvalidArgumentError, f"{field}: expected a 32-bit int"):
                op(t["q"], t["kv"], t["bt"], t["sl"], **args)
        self.assertEqual(rec.launches, [])
        op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=128, out=t["out"], window_left=5)
        self.assertEqual(rec.launches[-1]["window_left"], 5)


class Replanned(unittest.TestCase):
    """The C op plans again when a config is tuned in the process; a workspace memoized before is then refused
    (nothing launched), and the op sizes it afresh and runs the call once more."""

    def test_a_stale_workspace_is_planned_again_once(self):
        import ktune._lib as lib
        op, rec = make_op(workspace_bytes=0)
        t = tensors()

        def call():
            op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=128, out=t["out"])

        call()
        self.assertEqual(rec.launches[-1]["workspace_bytes"], 0)
        recorded = rec._run_on_device

        need = [4096]

        def refusing(handle, ref, stream, device):  # the C check of the op's current plan
            if ref._obj.workspace_bytes < need[0]:
                return 1
            return recorded(handle, ref, stream, device)

        rec._run_on_device = refusing
        rec.workspace_bytes = 4096
        saved = lib.last_error
        lib.last_error = lambda: "ktune xqa_decode: workspace: expected a device pointer of >= 4096 bytes, got null"
        try:
            call()
            self.assertEqual(rec.launches[-1]["workspace_bytes"], 4096)
            self.assertEqual(len(rec.launches), 2)
            call()  # planned afresh: no second retry needed
            self.assertEqual(len(rec.launches), 3)
            need[0] = rec.workspace_bytes = 8192  # tuned again: planned afresh once more
            call()
            self.assertEqual(rec.launches[-1]["workspace_bytes"], 8192)
            need[0] = 16384  # refused even as planned afresh: the error stands after one retry
            with self.assertRaisesRegex(InvalidArgumentError, "workspace"):
                call()
            self.assertEqual(len(rec.launches), 4)
        finally:
            lib.last_error = saved


class Memo(unittest.TestCase):
    """The facts memo: the plan depends on max_seq_len only through its power-of-two bucket, so an engine that
    passes each step's true maximum reuses one entry per bucket; and the memo is bounded."""

    def test_a_growing_max_seq_len_reuses_its_bucket_and_launches_its_own_value(self):
        op, rec = make_op()
        plans = []
        plan = rec.plan
        rec.plan = lambda ref: plans.append(ref._obj.max_seq_len) or plan(ref)
        t = tensors(pages_per_req=64)  # up to 2048 tokens a request
        lens = list(range(100, 2049)) + [2048, 2047, 129, 128, 1]
        for n in lens:
            op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=n, out=t["out"])
        self.assertEqual([a["max_seq_len"] for a in rec.launches], lens)
        self.assertEqual(plans, [100, 129, 257, 513, 1025, 1])  # buckets 128, 256, 512, 1024, 2048, 1
        self.assertEqual(len(op._seen), 6)
        with self.assertRaisesRegex(InvalidArgumentError, r"max_seq_len: expected a 32-bit int"):
            op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=2**31, out=t["out"])  # no bucket of its own
        with self.assertRaisesRegex(InvalidArgumentError, r"max_seq_len: expected a positive int"):
            op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=0, out=t["out"])
        self.assertEqual(len(rec.launches), len(lens))
        small = tensors(batch=1, pages_per_req=64)  # another plan between steps of one bucket
        for tt, n in ((t, 300), (small, 301), (t, 302), (t, 303), (small, 304)):
            op(tt["q"], tt["kv"], tt["bt"], tt["sl"], max_seq_len=n, out=tt["out"])
        self.assertEqual([(a["batch"], a["num_pages"], a["max_seq_len"]) for a in rec.launches[-5:]],
                         [(2, 128, 300), (1, 64, 301), (2, 128, 302), (2, 128, 303), (1, 64, 304)])

    def test_the_memo_keeps_a_bounded_number_of_facts(self):
        import ktune.ops as ops
        op, rec = make_op()
        for batch in range(1, ops._SEEN_MAX + 50):
            t = tensors(batch=batch, pages_per_req=1)
            op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=32, out=t["out"])
        self.assertEqual(len(op._seen), ops._SEEN_MAX)
        self.assertEqual(len(rec.launches), ops._SEEN_MAX + 49)


class StructWrites(unittest.TestCase):
    def test_a_write_that_fails_half_way_does_not_leave_stale_fields(self):
        op, rec = make_op()
        t = tensors()
        run = lambda **kw: op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=128, out=t["out"], **kw)  # noqa: E731
        run()
        with self.assertRaises(TypeError):  # softmax_scale is written, then q_scale cannot be
            run(softmax_scale=0.5, q_scale="not a number")
        run()
        self.assertAlmostEqual(rec.launches[-1]["softmax_scale"], 1 / math.sqrt(128), places=6)
        self.assertEqual(len(rec.launches), 2)

    def test_alternating_shapes_carry_their_own_fields(self):
        op, rec = make_op()
        small, big = tensors(batch=1), tensors(batch=3)
        for t in (small, big, small, big):
            op(t["q"], t["kv"], t["bt"], t["sl"], max_seq_len=128, out=t["out"])
        self.assertEqual([a["batch"] for a in rec.launches], [1, 3, 1, 3])
        self.assertEqual([a["num_pages"] for a in rec.launches], [4, 12, 4, 12])


if __name__ == "__main__":
    unittest.main()
