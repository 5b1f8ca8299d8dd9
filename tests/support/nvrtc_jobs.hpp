// The kernels `ktune compile --family F --arch A` builds, each exactly as the runtime hands it to NVRTC: bound
// to its binary key and carrying the key's options. The speed-option identity test and the cold-compile bench
// compile these, so both measure and prove what ships.
#pragma once

#include <string>
#include <vector>

#include "binary_key.hpp"
#include "ktune/device.hpp"
#include "ktune/family.hpp"
#include "nvrtc_api.hpp"
#include "nvrtc_compiler.hpp"

namespace ktune::test {

struct NvrtcJob {
  std::string name;  // the binary key's name: family/arch/problem/config
  GeneratedKernel kernel;
  Arch arch;
  std::vector<std::string> options;  // nvrtc_options: what the key covers
};

inline NvrtcJob nvrtc_job(const FamilyInfo& f, const std::string& problem, const std::string& config,
                          const Arch& arch) {
  const GeneratedKernel k = f.generate(problem, config, arch);
  NvrtcJob job{"", {}, arch, detail::nvrtc_options(k, arch)};
  const detail::BinaryKey key = detail::derive_binary_key(k, arch, "nvrtc", detail::nvrtc().version, job.options);
  job.name = key.name;
  job.kernel = detail::bound_kernel(k, key, false);
  return job;
}

// Every example problem of `f` at its default config for `arch` (what `ktune compile` builds by default), or
// at every config of its search space, then the problem's shared module where the family has one.
inline std::vector<NvrtcJob> nvrtc_jobs(const FamilyInfo& f, const Arch& arch, bool all_configs) {
  std::vector<NvrtcJob> out;
  for (const std::string& p : f.example_problems()) {
    if (all_configs)
      for (const std::string& c : f.search_space(p, arch, arch_limits(arch))) out.push_back(nvrtc_job(f, p, c, arch));
    else
      out.push_back(nvrtc_job(f, p, f.default_config(p, arch), arch));
    for (const std::string& c : shared_module_configs(f, p, arch)) out.push_back(nvrtc_job(f, p, c, arch));
  }
  return out;
}

}  // namespace ktune::test
