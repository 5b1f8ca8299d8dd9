// KTUNE_TEST_REQUIRE parsing (tests/support/skip.hpp): which capabilities a run demands. The failing side of
// the gate is checked end to end by tests/support/require_gate.sh (a FAIL inside this test would fail it).
#include <catch2/catch.hpp>

#include <cstdlib>
#include <string>

#include "support/env_guard.hpp"
#include "support/skip.hpp"

TEST_CASE("KTUNE_TEST_REQUIRE names capabilities exactly, comma-separated", "[support]") {
  ktune::test::EnvGuard guard("KTUNE_TEST_REQUIRE");
  using ktune::test::capability_required;
  unsetenv("KTUNE_TEST_REQUIRE");
  CHECK_FALSE(capability_required("gpu"));
  setenv("KTUNE_TEST_REQUIRE", "gpu", 1);
  CHECK(capability_required("gpu"));
  CHECK_FALSE(capability_required("nvrtc"));
  setenv("KTUNE_TEST_REQUIRE", "gpu,nvrtc,host", 1);
  CHECK(capability_required("gpu"));
  CHECK(capability_required("nvrtc"));
  CHECK(capability_required("host"));
  CHECK_FALSE(capability_required("sm_100a"));
  setenv("KTUNE_TEST_REQUIRE", "gpus,xhost", 1);  // no prefix or suffix matches
  CHECK_FALSE(capability_required("gpu"));
  CHECK_FALSE(capability_required("host"));
  setenv("KTUNE_TEST_REQUIRE", "", 1);
  CHECK_FALSE(capability_required("gpu"));
}
