// mxfp4_gemm on the host CPU: the same problem, arguments and semantics as ktune::mxfp4_gemm (mxfp4_gemm.hpp),
// run by the host variant of the kernel (templates/mxfp4_gemm/host_kernel.h) that the LLVM host backend
// JIT-compiles per specialization (n and k are compile-time constants there) and caches like a CUBIN
// (docs/host_backend.md).
//
//   ktune::Mxfp4GemmArgs a;            // the same struct as the GPU call, with HOST pointers
//   a.a = x.data(); a.weight = {ktune::mxfp4::packed_layout_version(), n, k, E, pw.data(), ps.data()};
//   a.c = y.data(); a.m = rows; a.expert_offsets = offsets.data();  // grouped: host int32 [E + 1]
//   ktune::mxfp4_gemm_host(rt, problem, a, /*threads=*/0);          // returns when C is written
//
// Differences from the GPU call: every pointer is host memory (the weight is the same prepacked layout,
// mxfp4::prepack_host); the call is synchronous; expert_offsets are read on the host and must be
// non-decreasing in [0, m] (the first bad entry is Error(invalid_argument) naming it; the device kernel, which
// cannot report, clamps instead); the config is tuned per host fingerprint
// (Runtime::host_tuned_config, same tuning key as the GPU) and is a host config ("bm4.tn2.kt4"). Needs
// libktune_host.so (else Error(no_compiler, "host", ...)).
#pragma once

#include <cstdint>
#include <string>

#include "ktune/export.hpp"
#include "ktune/mxfp4_gemm.hpp"
#include "ktune/runtime.hpp"
#include "mxfp4_gemm/spec.hpp"

namespace ktune {

struct KTUNE_API Mxfp4HostPlan {
  std::string config;      // host config key
  std::string source;      // "forced", "tuned" or "default"
  std::string tuning_key;  // the GPU call's key (problem + m bucket)
  int threads = 1;         // threads the call runs on
};

// What a call with m rows would run. threads <= 0: the hardware concurrency. Looks up tuned configs under the
// host fingerprint, so it needs the plugin unless `config` is forced.
KTUNE_API Mxfp4HostPlan mxfp4_gemm_host_plan(Runtime& rt, const mxfp4::Problem& problem, int64_t m, int threads = 0,
                                             const char* config = nullptr);

// Dense or grouped (problem.num_experts > 1) GEMM on the calling thread plus up to threads - 1 pool threads.
// Arguments are checked by mxfp4_gemm_validate, the GPU call's check (errors name the field), then the
// grouped expert offsets.
KTUNE_API void mxfp4_gemm_host(Runtime& rt, const mxfp4::Problem& problem, const Mxfp4GemmArgs& args,
                               int threads = 0);

// The loaded host kernel of (problem, config), compiling it if needed and allowed: warm-up without a call.
KTUNE_API const LoadedKernel& mxfp4_gemm_host_kernel(Runtime& rt, const mxfp4::Problem& problem,
                                                     const std::string& config);

}  // namespace ktune
