// The NVRTC front: one GeneratedKernel + arch → CUBIN (never PTX) and the lowered names of its entry points.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune::detail {

struct CompiledBinary {
  std::vector<uint8_t> cubin;
  std::vector<std::string> lowered_names;  // one per GeneratedKernel::entry_points
  std::string log;                          // compiler warnings, if any
  double compile_ms = 0;
};

// The full option list NVRTC receives: the arch option first, then ktune's defaults, then the spec's.
std::vector<std::string> nvrtc_options(const GeneratedKernel& kernel, const Arch& arch);

// Compiles with NVRTC. Throws CompileError carrying the log, the options and the kernel's readable name;
// Error(no_compiler) when NVRTC is missing.
CompiledBinary compile_with_nvrtc(const GeneratedKernel& kernel, const Arch& arch,
                                  const std::vector<std::string>& options);

}  // namespace ktune::detail
