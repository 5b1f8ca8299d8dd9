// The translation unit of a family's GPU module, built one way for every family: a first-line comment naming
// it, the device headers it includes, and the constants of one specialization as `struct Spec` in the family's
// device namespace, which its entry points instantiate ("ktune_xqa::decode_kernel<ktune_xqa::Spec>").
#pragma once

#include <string>
#include <vector>

#include "ktune/kernel_spec.hpp"

namespace ktune::device_source {

struct SpecSource {
  std::string family;                 // "xqa_decode"
  std::string problem_key, config_key;
  std::string title;                  // the first line's text after "// ktune <family> " (what the binary is for)
  std::vector<std::string> includes;  // "xqa_decode/kernel.cuh"
  std::string device_namespace;       // "ktune_xqa"
  std::string spec_members;           // the member lines of `struct Spec`, each ending in '\n'
  std::vector<std::string> entry_points;
};

// The GeneratedKernel of `s`, compiled as C++17.
GeneratedKernel generate(const SpecSource& s);

// "true" / "false", as Spec members spell booleans.
inline const char* flag(bool v) { return v ? "true" : "false"; }

}  // namespace ktune::device_source
