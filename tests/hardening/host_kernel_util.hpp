// Tiny host-backend kernels for the binding and poison tests: one C function of an int and its binary key digest.
#pragma once

#include <string>

#include "binary_key.hpp"
#include "host_compiler.hpp"
#include "ktune/kernel_spec.hpp"
#include "ktune/runtime.hpp"

namespace ktune::hardening {

// `extern "C" int symbol(int x) { return x <op> n; }` as kernel `problem_prefix + n` of `family`: configs of one
// family that share an entry-point name.
inline GeneratedKernel int_kernel(const std::string& family, const std::string& symbol, const std::string& op,
                                  const std::string& problem_prefix, int n) {
  GeneratedKernel k;
  k.family = family;
  k.problem_key = problem_prefix + std::to_string(n);
  k.config_key = "default";
  k.source = "extern \"C\" int " + symbol + "(int x) { return x " + op + " " + std::to_string(n) + "; }\n";
  k.entry_points = {symbol};
  return k;
}

inline std::string host_digest(const GeneratedKernel& k) {
  return detail::derive_binary_key(k, Arch::host_cpu(), "llvm", Runtime::host_target_id(), detail::host_options(k))
      .digest;
}

}  // namespace ktune::hardening
