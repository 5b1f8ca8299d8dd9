// xqa_decode on the host CPU: the same problem, arguments and semantics as ktune::xqa_decode (xqa_decode.hpp),
// run by the host variant of the kernel (templates/xqa_decode/host_kernel.h) that the LLVM host backend
// JIT-compiles per specialization and caches like a CUBIN (docs/host_backend.md).
//
//   ktune::XqaDecodeArgs a;            // the same struct as the GPU call, with HOST pointers
//   a.q = q.data(); a.kv_cache = kv.data(); ...; a.max_seq_len = 8192;
//   ktune::xqa_decode_host(rt, problem, a, /*threads=*/0);   // returns when the output is written
//
// Differences from the GPU call: every pointer is host memory; the call is synchronous; `workspace` may be
// null (a per-thread buffer inside ktune is used); the config is tuned per host fingerprint
// (Runtime::host_tuned_config) and is a host config ("t64.v8.u4"); the split count is planned from the thread
// count so that every thread has work. Needs libktune_host.so (else Error(no_compiler, "host", ...)).
#pragma once

#include <string>

#include "ktune/export.hpp"
#include "ktune/host_plan.hpp"
#include "ktune/runtime.hpp"
#include "ktune/xqa_decode.hpp"
#include "xqa_decode/spec.hpp"

namespace ktune {

using XqaHostPlan = HostSplitPlan;

// What a call would run. threads <= 0: the hardware concurrency. Looks up tuned configs under the host
// fingerprint, so it needs the plugin unless `config` is forced.
KTUNE_API XqaHostPlan xqa_decode_host_plan(Runtime& rt, const xqa::Problem& problem, int batch, int max_seq_len,
                                           int threads = 0, const char* config = nullptr, int num_splits = 0);

// Runs the decode (and, when split, the combine) on the calling thread plus up to threads - 1 pool threads.
// Arguments are checked as by xqa_decode_validate (errors name the field), then the index arrays, which are
// host memory here: q_cu_seq_lens, seq_lens and every block-table entry a request reads (the first bad one is
// Error(invalid_argument) naming the argument, request, value and allowed range; nothing is written).
KTUNE_API void xqa_decode_host(Runtime& rt, const xqa::Problem& problem, const XqaDecodeArgs& args, int threads = 0);

// The loaded host kernel of (problem, config), compiling it if needed and allowed: warm-up without a call.
KTUNE_API const LoadedKernel& xqa_decode_host_kernel(Runtime& rt, const xqa::Problem& problem,
                                                     const std::string& config);

}  // namespace ktune
