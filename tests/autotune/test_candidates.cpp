// autotune::candidate_configs: what the GPU and host tuners time and what warmup compiles with all candidates.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autotune/tuner.hpp"
#include "ktune/family.hpp"

using namespace ktune;

TEST_CASE("tuning candidates: the default first, then the search space in its order, each once", "[autotune]") {
  FamilyInfo f;  // an out-of-tree family's entries, which need not list the default first
  std::vector<std::string> asked;
  f.default_config = [](const std::string&, const Arch& arch) { return std::string(arch.host ? "h1" : "b"); };
  f.search_space = [&](const std::string& problem, const Arch&, const DeviceLimits& limits) {
    asked.push_back(problem + "/" + std::to_string(limits.max_threads_per_block));
    return std::vector<std::string>{"a", "b", "c", "a", "d"};
  };
  DeviceLimits limits;
  limits.max_threads_per_block = 512;
  CHECK(autotune::candidate_configs(f, "p1", Arch::parse("sm_90a"), limits) ==
        std::vector<std::string>{"b", "a", "c", "d"});
  CHECK(asked == std::vector<std::string>{"p1/512"});  // the limits reach the family unchanged
  // A default outside the search space (a family's fallback) still leads.
  CHECK(autotune::candidate_configs(f, "p2", Arch::host_cpu(), limits) ==
        std::vector<std::string>{"h1", "a", "b", "c", "d"});
}
