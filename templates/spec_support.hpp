// What every family's spec.cpp says the same way about a problem and a config: can_implement's answer for an
// invalid problem, and generate's refusal of a config that cannot run.
#pragma once

#include <string>

#include "ktune/arch.hpp"
#include "ktune/error.hpp"

namespace ktune::spec_support {

// "" for a valid problem, else "problem: <why>" (can_implement's first check).
template <class Problem>
std::string problem_error(const Problem& p) {
  try {
    p.validate();
  } catch (const Error& e) {
    return std::string("problem: ") + e.what();
  }
  return {};
}

// generate's precondition: a valid problem and a config that the family's can_implement (found by
// argument-dependent lookup) accepts on `arch` within `limits`. Throws
// Error(invalid_argument, family, "config: <config> cannot run <problem> on <arch>: <why>").
template <class Problem, class Config, class Limits>
void require_implementable(const char* family, const Problem& p, const Config& c, const Arch& arch,
                           const Limits& limits) {
  p.validate();
  const std::string why = can_implement(p, c, arch, limits);
  if (!why.empty())
    throw Error(Status::invalid_argument, family,
                "config: " + c.key() + " cannot run " + p.key() + " on " + arch.str() + ": " + why);
}

}  // namespace ktune::spec_support
