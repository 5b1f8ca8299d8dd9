// Compilation targets: CUDA arches (sm_XY with optional arch-specific suffix) and the host CPU.
#pragma once

#include <string>
#include <vector>

#include "ktune/export.hpp"

namespace ktune {

struct KTUNE_API Arch {
  int major = 0;      // 9 for sm_90a; 0 for the host target
  int minor = 0;      // 0 for sm_90a
  char suffix = 0;    // 'a' for sm_90a (arch-specific features: wgmma, tcgen05), 'f' for family, 0 for none
  bool host = false;  // the host CPU target (LLVM), not a CUDA arch

  // Parses "sm_90a", "sm_120a", "sm_80", "host". Throws ktune::Error (invalid_argument) naming the text.
  static Arch parse(const std::string& text);
  // The host CPU target (the same as parse("host")).
  static Arch host_cpu() {
    Arch a;
    a.host = true;
    return a;
  }
  // "sm_90a" / "host"
  std::string str() const;
  int sm() const { return major * 10 + minor; }  // 90 for sm_90a
  bool operator==(const Arch& o) const {
    return major == o.major && minor == o.minor && suffix == o.suffix && host == o.host;
  }
  bool operator!=(const Arch& o) const { return !(*this == o); }
};

// The CUDA arches ktune compiles for by default (no device present): sm_80, sm_86, sm_89, sm_90a, sm_100a,
// sm_103a, sm_120a, sm_121a.
KTUNE_API const std::vector<std::string>& supported_cuda_arches();

// "" when `a` names a target some NVIDIA GPU has (a shipped compute capability, sm_70 .. sm_121, with an 'a'
// variant only from sm_90 and an 'f' variant only from sm_100) or the host; else one sentence saying why not,
// e.g. "'sm_999' is not a GPU's compute capability (known: sm_70, ...)".
KTUNE_API std::string unknown_target_reason(const Arch& a);

// The arch a device of compute capability major.minor runs best: the 'a' variant where one exists (9.0, 10.x,
// 12.x), the plain one otherwise.
KTUNE_API Arch arch_for_compute_capability(int major, int minor);

}  // namespace ktune
