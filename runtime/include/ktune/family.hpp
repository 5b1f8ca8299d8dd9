// The kernel families this build knows, behind one uniform interface for the CLI, the C API and the tuner.
// Problems and configs travel as their readable keys ("d128.h32.kv8.p32..."), so a cache listing, a log line
// and a command line all speak the same language.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/export.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune {

class Runtime;

// A family's prepared op behind the C API and the bindings (ktune_op_prepare / ktune_op_run): it runs from the
// family's C argument struct (ktune.h), whose struct_size and family_id the caller has already checked.
class KTUNE_API COp {
 public:
  virtual ~COp() = default;
  virtual void run(const void* c_args, void* stream) const = 0;
  virtual std::string plan_json(const void* c_args) const = 0;  // what run(c_args) would launch
};

// FNV-1a of the family name: the family_id that begins every C argument struct (ktune_family_id).
constexpr uint32_t c_family_id(const char* name) {
  uint32_t h = 2166136261u;
  for (; name && *name; ++name) h = (h ^ static_cast<unsigned char>(*name)) * 16777619u;
  return name ? h : 0;
}

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
  // The C op of a canonical problem key, and the size of the C argument struct it runs from (sizeof the
  // ktune.h struct). Empty for a family without a C API.
  std::function<std::unique_ptr<COp>(Runtime&, const std::string& problem_key)> prepare_c_op;
  uint32_t c_args_size = 0;
  // A few representative problems (what `ktune compile --family F` builds when given no problem).
  std::function<std::vector<std::string>()> example_problems;
};

KTUNE_API const std::vector<FamilyInfo>& families();
// Throws Error(not_found) listing the known families.
KTUNE_API const FamilyInfo& family(const std::string& name);

}  // namespace ktune
