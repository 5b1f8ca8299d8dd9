#include "ktune/arch.hpp"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <vector>

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune {

Arch Arch::parse(const std::string& text) {
  Arch a;
  if (text == "host") {
    a.host = true;
    return a;
  }
  auto bad = [&] {
    return Error(Status::invalid_argument, "arch",
                 fmt::format("'{}' is not an arch: expected sm_<major><minor>[a|f] (e.g. sm_90a) or host", text));
  };
  if (text.size() < 5 || text.compare(0, 3, "sm_") != 0) throw bad();
  size_t i = 3;
  std::string digits;
  while (i < text.size() && std::isdigit(static_cast<unsigned char>(text[i]))) digits += text[i++];
  if (digits.size() < 2 || digits.size() > 3) throw bad();
  if (i < text.size()) {
    if (i + 1 != text.size() || (text[i] != 'a' && text[i] != 'f')) throw bad();
    a.suffix = text[i];
  }
  int sm = std::stoi(digits);
  a.major = sm / 10;
  a.minor = sm % 10;
  if (a.major < 7) throw bad();
  return a;
}

std::string Arch::str() const {
  if (host) return "host";
  return fmt::format("sm_{}{}{}", major, minor, suffix ? std::string(1, suffix) : std::string());
}

const std::vector<std::string>& supported_cuda_arches() {
  static const std::vector<std::string> arches = {"sm_80",   "sm_86",   "sm_89",   "sm_90a",
                                                  "sm_100a", "sm_103a", "sm_120a", "sm_121a"};
  return arches;
}

Arch arch_for_compute_capability(int major, int minor) {
  Arch a;
  a.major = major;
  a.minor = minor;
  if (major == 9 || major == 10 || major == 12) a.suffix = 'a';
  return a;
}

namespace {
// Compute capabilities of shipped NVIDIA GPUs that a CUDA 12/13 toolkit can target.
constexpr int kKnownSm[] = {70, 72, 75, 80, 86, 87, 89, 90, 100, 101, 103, 110, 120, 121};
}  // namespace

std::string unknown_target_reason(const Arch& a) {
  if (a.host) return {};
  if (std::find(std::begin(kKnownSm), std::end(kKnownSm), a.sm()) == std::end(kKnownSm)) {
    std::vector<std::string> names;
    for (int sm : kKnownSm) names.push_back(fmt::format("sm_{}", sm));
    return fmt::format("'{}' is not a GPU's compute capability (known: {})", a.str(), fmt::join(names, ", "));
  }
  if ((a.suffix == 'a' && a.major < 9) || (a.suffix == 'f' && a.major < 10))
    return fmt::format("'{}': the '{}' variant exists only from sm_{}0 on", a.str(), a.suffix, a.suffix == 'a' ? 9 : 10);
  return {};
}

}  // namespace ktune
