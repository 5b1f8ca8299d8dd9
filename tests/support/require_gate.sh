#!/usr/bin/env bash
# KTUNE_TEST_REQUIRE turns a gated skip into a failure: on a machine without a GPU, one [gpu] test run with
# KTUNE_TEST_REQUIRE=gpu must fail and say why, and the same test without it must pass (skipped, with a WARN).
# Exit 77 (skipped) where a GPU is present: there the test runs for real.
#   tests/support/require_gate.sh <ktune_tests>
set -u
t=$1
name="[gpu][runtime]"
if nvidia-smi -L >/dev/null 2>&1; then
  echo "a GPU is present: the gate has nothing to refuse here"
  exit 77
fi
out=$(KTUNE_TEST_REQUIRE=nvrtc,gpu "$t" "$name" 2>&1)
rc=$?
if ((rc == 0)) || ! grep -q "KTUNE_TEST_REQUIRE names gpu" <<<"$out"; then
  echo "FAIL: with KTUNE_TEST_REQUIRE=gpu the skipped GPU test did not fail (exit $rc):"
  echo "$out" | tail -20
  exit 1
fi
out=$("$t" "$name" 2>&1) || { echo "FAIL: without KTUNE_TEST_REQUIRE the GPU test did not pass:"; echo "$out" | tail; exit 1; }
grep -q "test skipped" <<<"$out" || { echo "FAIL: the skip was not reported"; exit 1; }
echo "KTUNE_TEST_REQUIRE=gpu: a skipped GPU test fails; unset: it skips and says why"
