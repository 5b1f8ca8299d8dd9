// KTUNE_TEST_SEED parsing (tests/support/seed.hpp): a set value replays exactly, a bad one is an error that names
// the variable (never a silent seed 0 or a fresh seed), an empty one counts as unset.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "support/env_guard.hpp"
#include "support/seed.hpp"

TEST_CASE("KTUNE_TEST_SEED replays a seed and refuses anything but a decimal 64-bit number", "[support]") {
  ktune::test::EnvGuard guard("KTUNE_TEST_SEED");
  using ktune::test::run_seed;
  setenv("KTUNE_TEST_SEED", "0", 1);
  CHECK(run_seed("seed test") == 0);
  setenv("KTUNE_TEST_SEED", "1234567", 1);
  CHECK(run_seed("seed test") == 1234567);
  setenv("KTUNE_TEST_SEED", "18446744073709551615", 1);
  CHECK(run_seed("seed test") == 18446744073709551615ull);
  for (const char* bad : {"abc", "12x", "0x10", "-1", "+5", " 7", "7 ", "1.5", "18446744073709551616"}) {
    INFO("KTUNE_TEST_SEED=\"" << bad << "\"");
    setenv("KTUNE_TEST_SEED", bad, 1);
    CHECK_THROWS_WITH(run_seed("seed test"), Catch::Contains("KTUNE_TEST_SEED") && Catch::Contains(bad) &&
                                                 Catch::Contains("expected a decimal integer"));
    CHECK_THROWS_AS(run_seed("seed test"), std::invalid_argument);
  }
  // Unset or empty: a fresh seed each call (two equal 64-bit draws would be a broken random_device).
  unsetenv("KTUNE_TEST_SEED");
  CHECK(run_seed("seed test") != run_seed("seed test"));
  setenv("KTUNE_TEST_SEED", "", 1);
  CHECK(run_seed("seed test") != run_seed("seed test"));
}
