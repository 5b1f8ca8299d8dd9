// The kernel families this build knows, behind one uniform interface for the CLI, the C API and the tuner.
// Problems and configs travel as their readable keys ("d128.h32.kv8.p32..."), so a cache listing, a log line
// and a command line all speak the same language.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/export.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune {

struct KTUNE_API FamilyInfo {
  std::string name;         // "xqa_decode"
  std::string description;  // one line
  // Parses and validates a problem key, returning its canonical form. Throws Error(invalid_argument).
  std::function<std::string(const std::string& problem_key)> canonical_problem;
  // Builds a problem key from a JSON object of problem fields (documented per family in docs/).
  std::function<std::string(const std::string& problem_json)> problem_from_json;
  std::function<std::string(const std::string& problem_key, const Arch&)> default_config;
  // Every candidate config that can_implement accepts for this problem on `limits`.
  std::function<std::vector<std::string>(const std::string& problem_key, const Arch&, const DeviceLimits&)>
      search_space;
  std::function<GeneratedKernel(const std::string& problem_key, const std::string& config_key, const Arch&)>
      generate;
  // A few representative problems (what `ktune compile --family F` builds when given no problem).
  std::function<std::vector<std::string>()> example_problems;
};

KTUNE_API const std::vector<FamilyInfo>& families();
// Throws Error(not_found) listing the known families.
KTUNE_API const FamilyInfo& family(const std::string& name);

}  // namespace ktune
