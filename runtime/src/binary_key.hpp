// The binary key: a digest over everything that changes a compiled binary, plus the same inputs kept as
// readable fields (they become columns in the cache so stale entries can be listed and pruned).
#pragma once

#include <string>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune::detail {

// Bumped whenever what ktune stores for a binary changes meaning (entry-point encoding, blob format).
constexpr int kBinaryFormatVersion = 1;

struct BinaryKey {
  std::string name;              // family/arch/problem_key/config_key
  std::string family;
  std::string arch;              // "sm_90a"
  std::string compiler;          // "nvrtc"
  std::string compiler_version;  // "13.0.88"; empty when the compiler is absent (lookup by other columns)
  std::string options;           // normalized, space-joined, arch option included
  std::string source_digest;     // sha256 of the generated source and every header it includes
  std::string ktune_version;
  std::string entry_points;      // the name expressions, '\n'-joined
  int format_version = kBinaryFormatVersion;
  std::string digest;            // sha256 over all of the above
};

// Options in the order the compiler receives them, with surrounding whitespace trimmed and empty ones dropped.
std::vector<std::string> normalize_options(const std::vector<std::string>& options);

std::string source_digest(const std::string& source);

BinaryKey derive_binary_key(const GeneratedKernel& kernel, const Arch& arch, const std::string& compiler,
                            const std::string& compiler_version, const std::vector<std::string>& options);

}  // namespace ktune::detail
