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

// The options the binary key covers: the arch option first, then ktune's defaults, then the spec's.
std::vector<std::string> nvrtc_options(const GeneratedKernel& kernel, const Arch& arch);

// Options that change how long NVRTC takes, never the CUBIN it produces, added after the key options:
// `--minimal` (nvrtc_takes_minimal), whose left-out declarations ktune's templates do not use (~5 ms less C++
// front end per kernel). They are no binary key input: the [nvrtc_speed] test compiles a default spec of every
// family with and without them and requires byte-identical CUBINs. Empty for an NVRTC that lacks them.
std::vector<std::string> nvrtc_speed_options(const std::string& nvrtc_version);

enum class SpeedOptions { on, off };  // off: only for proving that they change nothing, and for measuring

// Compiles with NVRTC: `options` (nvrtc_options: what the key covers), then nvrtc_speed_options unless
// `speed` is off. Throws CompileError carrying the log, every option passed and the kernel's readable name;
// Error(no_compiler) when NVRTC is missing.
CompiledBinary compile_with_nvrtc(const GeneratedKernel& kernel, const Arch& arch,
                                  const std::vector<std::string>& options, SpeedOptions speed = SpeedOptions::on);

}  // namespace ktune::detail
