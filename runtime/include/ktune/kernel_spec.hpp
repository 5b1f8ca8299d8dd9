// The contract between a kernel family's spec (templates/<family>/spec.*) and the runtime.
//
// A spec is pure: from a problem description and a tile config it *describes* a kernel (generated source,
// options, entry points) and its launch geometry. It never compiles, caches or times anything itself; the
// runtime turns a GeneratedKernel into a loaded module, and the autotuner picks configs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ktune {

// What a spec hands the compiler. The source is one translation unit; it may `#include "common/x.cuh"` and
// `#include "<family>/kernel.cuh"`, which resolve to the templates embedded in the library at build time
// (no file is read at run time, no toolkit header is needed).
struct GeneratedKernel {
  std::string family;       // "xqa_decode"
  std::string problem_key;  // readable static-problem key, e.g. "d128.g4.p32.hnd.bf16-fp8.q4.causal.sink"
  std::string config_key;   // readable tile config, e.g. "t64.s2.w4"
  std::string source;       // the generated translation unit
  // Entry points, each a C++ expression naming a __global__ function template instance, e.g.
  // "ktune_xqa::decode_kernel<ktune_xqa::Spec>". The runtime registers each with nvrtcAddNameExpression and
  // resolves it to its lowered (mangled) name; launches refer to entry points by index in this vector.
  std::vector<std::string> entry_points;
  std::vector<std::string> options;  // extra compiler options (the arch option is added by the runtime)
};

// Launch geometry of one entry point.
struct LaunchDims {
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  unsigned dynamic_smem_bytes = 0;
};

// Device limits a spec may consult in can_implement / launch planning. Filled from the device when one is
// present, or from the arch's published limits when compiling for an arch without a device.
struct DeviceLimits {
  int sm_count = 132;
  int max_smem_per_block_optin = 227 * 1024;
  int max_threads_per_block = 1024;
  int l2_bytes = 50 * 1024 * 1024;
};

}  // namespace ktune
