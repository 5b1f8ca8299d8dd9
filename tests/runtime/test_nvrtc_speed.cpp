// The options compile_with_nvrtc adds only to compile faster (nvrtc_speed_options) are no binary key input,
// so they must not change a byte of what NVRTC produces: a default spec of every family and its shared module,
// compiled as the runtime compiles it, gives the same CUBIN and lowered names with and without them.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>
#include <vector>

#include "ktune/family.hpp"
#include "nvrtc_api.hpp"
#include "nvrtc_compiler.hpp"
#include "support/nvrtc_jobs.hpp"
#include "support/skip.hpp"

using namespace ktune;

TEST_CASE("nvrtc speed options: no key input", "[nvrtc_speed]") {
  const std::vector<std::string> speed = detail::nvrtc_speed_options("13.0.88");
  REQUIRE(!speed.empty());
  CHECK(detail::nvrtc_speed_options("12.3.107").empty());  // --minimal arrived in 12.4
  CHECK(detail::nvrtc_speed_options("12.4.99") == speed);
  CHECK(detail::nvrtc_speed_options("").empty());
  // The key is derived from nvrtc_options; none of the speed options may be among them.
  for (const FamilyInfo& f : families()) {
    const std::string p = f.example_problems().front();
    const Arch a = Arch::parse("sm_90a");
    const auto opts = detail::nvrtc_options(f.generate(p, f.default_config(p, a), a), a);
    for (const std::string& s : speed)
      CHECK(std::find(opts.begin(), opts.end(), s) == opts.end());
  }
}

TEST_CASE("nvrtc speed options: a default spec of every family (and its shared module) compiles to the same CUBIN "
          "with and without them",
          "[nvrtc_speed][compile]") {
  KTUNE_REQUIRE_NVRTC();
  const std::string version = detail::nvrtc().version;
  KTUNE_GATE("nvrtc", !detail::nvrtc_speed_options(version).empty(),
             "NVRTC " << version << " takes none of the speed options (nothing to compare)");
  const Arch arch = Arch::parse("sm_90a");
  for (const FamilyInfo& f : families()) {
    const std::string p = f.example_problems().front();
    std::vector<std::string> configs = {f.default_config(p, arch)};
    for (const std::string& c : shared_module_configs(f, p, arch)) configs.push_back(c);  // the shared module too
    for (const std::string& c : configs) {
      const test::NvrtcJob job = test::nvrtc_job(f, p, c, arch);
      INFO(job.name);
      const auto fast = detail::compile_with_nvrtc(job.kernel, arch, job.options, detail::SpeedOptions::on);
      const auto plain = detail::compile_with_nvrtc(job.kernel, arch, job.options, detail::SpeedOptions::off);
      REQUIRE(!plain.cubin.empty());
      CHECK(fast.cubin.size() == plain.cubin.size());
      CHECK(fast.cubin == plain.cubin);
      CHECK(fast.lowered_names == plain.lowered_names);
    }
  }
}
