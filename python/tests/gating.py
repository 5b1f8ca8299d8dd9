"""KTUNE_TEST_REQUIRE for the Python tests, as tests/support/skip.hpp is for the C++ suite: a comma-separated
list of capabilities (gpu, host, ...) this run must have. A test that would skip for a listed one fails instead,
so a run on a machine that has them cannot pass by skipping."""

import os
import unittest


def required(capability):
    return capability in [c for c in os.environ.get("KTUNE_TEST_REQUIRE", "").split(",") if c]


def skip_unless(capability, available, why):
    """unittest.skipUnless(available, why), except that a missing required capability fails the tests."""
    if available:
        return lambda obj: obj
    if not required(capability):
        return unittest.skip(why)
    msg = f"KTUNE_TEST_REQUIRE names {capability} but this test would skip: {why}"

    def fail_instead(obj):
        if isinstance(obj, type):
            obj.setUp = lambda self: self.fail(msg)
            for name in ("setUpClass", "tearDownClass"):
                if name in vars(obj):
                    setattr(obj, name, classmethod(lambda cls: None))
            return obj

        def test(self, *args, **kwargs):
            self.fail(msg)
        test.__name__ = obj.__name__
        return test
    return fail_instead


def skip_test(case, capability, why):
    """case.skipTest(why) inside a test, or case.fail when KTUNE_TEST_REQUIRE names the capability."""
    if required(capability):
        case.fail(f"KTUNE_TEST_REQUIRE names {capability} but this test would skip: {why}")
    case.skipTest(why)
