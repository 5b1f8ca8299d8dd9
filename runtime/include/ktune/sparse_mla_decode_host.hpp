// sparse_mla_decode on the host CPU: the same problem, arguments and semantics as ktune::sparse_mla_decode
// (sparse_mla_decode.hpp), run by the host variant of the kernel (templates/sparse_mla_decode/host_kernel.h)
// that the LLVM host backend JIT-compiles per specialization and caches like a CUBIN (docs/host_backend.md).
//
//   ktune::SparseMlaDecodeArgs a;      // the same struct as the GPU call, with HOST pointers
//   a.q = q.data(); a.kv_cache = kv.data(); a.indices = idx.data(); a.out = out.data(); ...
//   ktune::sparse_mla_decode_host(rt, problem, a, /*threads=*/0);   // returns when the output is written
//
// Differences from the GPU call: every pointer is host memory; the call is synchronous; `workspace` may be
// null (a per-thread buffer inside ktune is used); the config is tuned per host fingerprint
// (Runtime::host_tuned_config) and is a host config ("t32.g16.v16.u2"); the split count is planned from the
// thread count so that every thread has work. Out-of-range indices: the host reads the index array before the
// kernel runs, so every entry that is neither -1 nor a slot in [0, num_pages * page_size) is refused with
// Error(invalid_argument, "sparse_mla_decode", "indices: token T entry K: ...") and nothing is written (the GPU
// call cannot read device memory on the host; there only the checked variant reports them). problem.checked
// changes nothing on the host: it always checks. Needs libktune_host.so (else Error(no_compiler, "host", ...)).
#pragma once

#include <string>

#include "ktune/export.hpp"
#include "ktune/host_plan.hpp"
#include "ktune/runtime.hpp"
#include "ktune/sparse_mla_decode.hpp"
#include "sparse_mla_decode/spec.hpp"

namespace ktune {

using SparseMlaHostPlan = HostSplitPlan;

// What a call with num_tokens would run. threads <= 0: the hardware concurrency. Looks up tuned configs under
// the host fingerprint, so it needs the plugin unless `config` is forced.
KTUNE_API SparseMlaHostPlan sparse_mla_decode_host_plan(Runtime& rt, const mla::Problem& problem, int num_tokens,
                                                        int threads = 0, const char* config = nullptr,
                                                        int num_splits = 0);

// Runs the decode (and, when split, the combine) on the calling thread plus up to threads - 1 pool threads.
// Arguments are checked as by sparse_mla_decode_validate (errors name the field), then every index.
KTUNE_API void sparse_mla_decode_host(Runtime& rt, const mla::Problem& problem, const SparseMlaDecodeArgs& args,
                                      int threads = 0);

// The loaded host kernel of (problem, config), compiling it if needed and allowed: warm-up without a call.
KTUNE_API const LoadedKernel& sparse_mla_decode_host_kernel(Runtime& rt, const mla::Problem& problem,
                                                            const std::string& config);

}  // namespace ktune
