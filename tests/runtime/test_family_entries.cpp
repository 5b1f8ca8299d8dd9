// The registry's key entries of every family (this build's and the example family registered by the test
// binary) keep the contract the tuner, warmup and `ktune compile` build on: a search space of distinct configs
// that all generate, the default first wherever it can run, and a shared module exactly where the family says
// it keeps one. Pure: sources are generated, nothing is compiled.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"

using namespace ktune;

TEST_CASE("family entries: search spaces list distinct configs that generate, the default first", "[family]") {
  const std::vector<std::string> arches = {"sm_80", "sm_89", "sm_90a", "sm_100a", "sm_120a", "host"};
  int spaces = 0, defaults_first = 0;
  for (const FamilyInfo& f : families()) {
    for (const std::string& problem : f.example_problems()) {
      for (const std::string& arch_name : arches) {
        const Arch arch = Arch::parse(arch_name);
        INFO(f.name << " " << problem << " " << arch_name);
        std::string def;
        try {
          def = f.default_config(problem, arch);
        } catch (const Error&) {
          // No config of the family fits this problem on this arch (sparse MLA before sm_89): then neither may
          // a search space be offered.
          CHECK_THROWS_AS(f.search_space(problem, arch, arch_limits(arch)), Error);
          continue;
        }
        const std::vector<std::string> space = f.search_space(problem, arch, arch_limits(arch));
        ++spaces;
        REQUIRE(!space.empty());
        CHECK(std::set<std::string>(space.begin(), space.end()).size() == space.size());
        // generate() refuses a config that cannot run (spec_support::require_implementable): every candidate
        // must pass, and a default that passes must lead the list.
        for (const std::string& c : space) CHECK_NOTHROW(f.generate(problem, c, arch));
        bool default_runs = true;
        try {
          f.generate(problem, def, arch);
        } catch (const Error&) {
          default_runs = false;
        }
        if (default_runs) {
          CHECK(space.front() == def);
          ++defaults_first;
        }
        const std::vector<std::string> shared = shared_module_configs(f, problem, arch);
        if (shared.empty()) continue;
        REQUIRE(shared == std::vector<std::string>{kSharedConfig});
        const GeneratedKernel sk = f.generate(problem, kSharedConfig, arch);
        CHECK(sk.config_key == kSharedConfig);
        CHECK(!sk.entry_points.empty());
        // The shared module's kernels are none of a config module's.
        for (const std::string& e : f.generate(problem, space.front(), arch).entry_points)
          CHECK(std::find(sk.entry_points.begin(), sk.entry_points.end(), e) == sk.entry_points.end());
      }
    }
  }
  // Within an arch's own limits a family's default always runs, so it led every space above.
  CHECK(spaces > 0);
  CHECK(defaults_first == spaces);
}
