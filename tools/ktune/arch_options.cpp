#include "arch_options.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "args.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"

namespace ktune::cli {

std::vector<Arch> parse_arch_option(const std::string& list, bool allow_host) {
  std::vector<Arch> out;
  const std::vector<std::string> names = split(list, ',');
  if (names.empty())
    throw UsageError("--arch: expected a comma-separated list like sm_90a,sm_120a, got '" + list + "'");
  for (const auto& name : names) {
    Arch a;
    try {
      a = Arch::parse(name);
    } catch (const Error&) {
      throw UsageError(fmt::format("--arch: '{}' is not an arch: expected sm_<major><minor>[a|f] (e.g. sm_90a){}",
                                   name, allow_host ? " or host" : ""));
    }
    if (a.host && !allow_host) throw UsageError("--arch: this command takes CUDA arches only, got 'host'");
    if (!a.host) {
      if (const std::string why = unknown_target_reason(a); !why.empty()) throw UsageError("--arch: " + why);
      const Arch looked_up = arch_for_compute_capability(a.major, a.minor);
      if (looked_up != a)
        fmt::print(stderr,
                   "ktune: warning: --arch {}: a runtime on a compute capability {}.{} GPU looks up {} binaries, so "
                   "these are never loaded there (use --arch {})\n",
                   a.str(), a.major, a.minor, looked_up.str(), looked_up.str());
    }
    if (std::find(out.begin(), out.end(), a) == out.end()) out.push_back(a);
  }
  return out;
}

bool make_gpu_current() {
  if (system_info().devices.empty()) return false;
  use_device(0);
  return true;
}

}  // namespace ktune::cli
