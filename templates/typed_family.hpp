// The FamilyInfo entries that turn a family's typed spec (spec.hpp: Problem, Config, default_config,
// search_space, can_implement, generate and, where a family has one, generate_shared) into the registry's
// string-keyed form. Every family fills them the same way, so they are written once, here.
#pragma once

#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ktune/family.hpp"

namespace ktune::typed_family {

// A family whose problems have a shared module declares generate_shared(const Problem&, const Arch&) beside
// generate (found by argument-dependent lookup, like the rest of the spec).
template <class Problem, class = void>
struct has_generate_shared : std::false_type {};
template <class Problem>
struct has_generate_shared<Problem, std::void_t<decltype(generate_shared(std::declval<const Problem&>(),
                                                                         std::declval<const Arch&>()))>>
    : std::true_type {};

// Fills canonical_problem, default_config, search_space and generate of `f` from the spec of Problem and Config.
// Keys are parsed (and validated) by Problem::from_key and Config::from_key on every call, so a bad key throws
// their errors, naming the field. The search space lists the default config first where this device can run it
// (the tuner's baseline), then every other candidate can_implement accepts, in the spec's order.
template <class Problem, class Config>
void fill_kernel_entries(FamilyInfo& f) {
  f.canonical_problem = [](const std::string& key) { return Problem::from_key(key).key(); };
  f.default_config = [](const std::string& key, const Arch& arch) {
    return default_config(Problem::from_key(key), arch).key();
  };
  f.search_space = [](const std::string& key, const Arch& arch, const DeviceLimits& limits) {
    const Problem p = Problem::from_key(key);
    const Config d = default_config(p, arch);
    const std::string default_key = d.key();
    std::vector<std::string> out;
    if (can_implement(p, d, arch, limits).empty()) out.push_back(default_key);
    for (const Config& c : search_space(p, arch)) {
      std::string k = c.key();
      if (k != default_key && can_implement(p, c, arch, limits).empty()) out.push_back(std::move(k));
    }
    return out;
  };
  f.generate = [](const std::string& key, const std::string& config, const Arch& arch) {
    const Problem p = Problem::from_key(key);
    if constexpr (has_generate_shared<Problem>::value)
      if (config == kSharedConfig) return generate_shared(p, arch);
    return generate(p, Config::from_key(config), arch);
  };
}

}  // namespace ktune::typed_family
