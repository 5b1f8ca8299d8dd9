// Gated tests: a test that needs something this machine may lack (a GPU, NVRTC, the LLVM host backend, a
// particular arch) skips with the reason, unless KTUNE_TEST_REQUIRE names that capability, in which case the
// skip is a failure. KTUNE_TEST_REQUIRE is a comma-separated list, e.g. `gpu`, `gpu,nvrtc,host`, `sm_100a`:
// a run on a machine that has them cannot pass by skipping.
#pragma once

#include <catch2/catch.hpp>

#include <cstdlib>
#include <sstream>
#include <string>

#include "nvrtc_api.hpp"

namespace ktune::test {

// True when KTUNE_TEST_REQUIRE lists `capability` (exact, case-sensitive names between commas).
inline bool capability_required(const std::string& capability) {
  const char* env = std::getenv("KTUNE_TEST_REQUIRE");
  if (!env) return false;
  const std::string list = env;
  size_t start = 0;
  while (start <= list.size()) {
    const size_t end = list.find(',', start);
    const std::string item = list.substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (item == capability) return true;
    if (end == std::string::npos) break;
    start = end + 1;
  }
  return false;
}

// The one place a gated test reports that it cannot run: FAIL (throws, ending the test case) when
// KTUNE_TEST_REQUIRE names `capability`, else a WARN with the reason; the caller then returns.
inline void skip_or_fail(const std::string& capability, const std::string& why) {
  if (capability_required(capability))
    FAIL("KTUNE_TEST_REQUIRE names " << capability << " but this test would skip: " << why);
  WARN("[" << capability << "] test skipped: " << why);
}

}  // namespace ktune::test

// In a TEST_CASE body: when `available` is false, skip_or_fail, then return. `why` may be a stream expression.
#define KTUNE_GATE(capability, available, why)                     \
  do {                                                             \
    if (!(available)) {                                            \
      std::ostringstream ktune_gate_why;                           \
      ktune_gate_why << why;                                       \
      ::ktune::test::skip_or_fail(capability, ktune_gate_why.str()); \
      return;                                                      \
    }                                                              \
  } while (0)

// NVRTC: every compile test needs it (CI has it; a bare build machine may not).
#define KTUNE_REQUIRE_NVRTC()                                                      \
  do {                                                                             \
    std::string why_no_nvrtc;                                                      \
    const bool have_nvrtc_here = ::ktune::detail::try_nvrtc(&why_no_nvrtc) != nullptr; \
    KTUNE_GATE("nvrtc", have_nvrtc_here, "NVRTC not available (" << why_no_nvrtc << ")"); \
  } while (0)
