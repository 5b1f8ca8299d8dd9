// mxfp4_gemm, the engine-facing call: C[m, n] = A[m, k] * W[n, k]^T (+ bias[n]) with W in OCP MXFP4,
// dense or grouped over MoE experts (tokens sorted by expert, expert_offsets on the device).
//
//   // once, at load: reorder the canonical weight into the kernel's layout and upload it
//   std::vector<uint8_t> pw(ktune::mxfp4::packed_weight_bytes(n, k, E)), ps(ktune::mxfp4::packed_scale_bytes(n, k, E));
//   ktune::mxfp4::prepack_host(w_packed, w_scale, n, k, E, pw.data(), ps.data());   // (or `ktune prepack`)
//   ktune::Mxfp4Weight w{ktune::mxfp4::packed_layout_version(), n, k, E, d_pw, d_ps};
//   // every step
//   ktune::mxfp4::Problem p; p.n = n; p.k = k; p.num_experts = E; p.top_k = 4;
//   ktune::Mxfp4GemmArgs a; a.a = x; a.weight = w; a.c = y; a.m = rows; a.expert_offsets = offs;
//   auto op = ktune::mxfp4::prepare(rt, p);  // once: validates the problem (ktune/op.hpp)
//   op.run(a, stream);                       // every step (ktune::mxfp4_gemm(rt, p, a, stream): one-shot)
//
// CUDA-graph safe: no device->host read (expert_offsets stay on the device), no allocation, no sync. The
// launch geometry depends only on the problem, the config and the host-known row count `m`.
// Alignment: a, c 16-byte / 4-byte aligned; lda a multiple of 8 elements (16-byte rows); packed weight and
// scales 16-byte aligned; bias 2-byte aligned. Every argument is checked on the host before any driver call;
// a bad one raises Error(Status::invalid_argument, "mxfp4_gemm", "<field>: expected ..., got ...").
//
// NaN scales: an e8m0 scale of 0xFF is NaN; every output that sums over a block with a NaN scale is NaN (the
// whole column n of the rows that use that weight row), as in the exact reference. A scale of 254 with a
// code of 6 overflows to Inf like the fp32 reference would.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ktune/export.hpp"
#include "ktune/op.hpp"
#include "ktune/runtime.hpp"
#include "mxfp4_gemm/spec.hpp"

namespace ktune {

// A prepacked weight on the device (see mxfp4::prepack_host). layout_version must equal
// mxfp4::packed_layout_version(): a weight packed by another ktune layout is refused, never misread.
struct KTUNE_API Mxfp4Weight {
  int layout_version = 0;
  int n = 0, k = 0, num_experts = 1;
  const void* packed = nullptr;  // mxfp4::packed_weight_bytes(n, k, num_experts) bytes, 16-byte aligned
  const void* scales = nullptr;  // mxfp4::packed_scale_bytes(n, k, num_experts) bytes, 16-byte aligned
};

struct KTUNE_API Mxfp4GemmArgs {
  const void* a = nullptr;       // [m, k] a dtype, row stride lda
  int lda = 0;                   // elements; 0 = k
  Mxfp4Weight weight;
  const void* bias = nullptr;    // [num_experts, n] out dtype, or null
  void* c = nullptr;             // [m, n] out dtype, row stride ldc
  int ldc = 0;                   // elements; 0 = n
  int m = 0;                     // rows of A and C (grouped: all experts' rows; >= 0, 0 = nothing to do)
  const int32_t* expert_offsets = nullptr;  // grouped: [num_experts + 1] on the device; dense: null
  // Force a config key (tuner, benches); nullptr = tuned or default. The opt-in native block-scaled MMA paths
  // are only reached this way: "....mx" on sm_120a, "bm{16,32,64,128}.tn2.wn4.wk1.s2.d1.tc" on sm_100a; both
  // quantize the activations to MXFP8 first (docs/mxfp4_gemm.md), and neither has run on hardware yet.
  const char* config = nullptr;
};

using Mxfp4GemmPlan = LaunchPlan;  // num_splits 1, no workspace

// The prepared op (ktune/op.hpp); op.plan(args) reads m and config.
struct Mxfp4GemmFamily {
  using Problem = mxfp4::Problem; using Args = Mxfp4GemmArgs; using Plan = Mxfp4GemmPlan;
  static constexpr const char* kName = "mxfp4_gemm";
};
using Mxfp4GemmOp = Op<Mxfp4GemmFamily>;
extern template class KTUNE_API Op<Mxfp4GemmFamily>;
namespace mxfp4 { inline Mxfp4GemmOp prepare(Runtime& rt, const Problem& p) { return Mxfp4GemmOp::prepare(rt, p); } }

// Tuning bucket of a call: dense m; grouped ceil(m / top_k) (tokens), rounded up to a power of two.
KTUNE_API int64_t mxfp4_gemm_bucket(const mxfp4::Problem& problem, int64_t m);

// What a call with m rows will run (needs a current CUDA context unless `config` is forced).
KTUNE_API Mxfp4GemmPlan mxfp4_gemm_plan(Runtime& rt, const mxfp4::Problem& problem, int64_t m,
                                        const char* config = nullptr);

KTUNE_API void mxfp4_gemm(Runtime& rt, const mxfp4::Problem& problem, const Mxfp4GemmArgs& args, void* stream);

// The host-side argument check mxfp4_gemm runs first (no driver call). Throws Error(invalid_argument).
KTUNE_API void mxfp4_gemm_validate(const mxfp4::Problem& problem, const Mxfp4GemmArgs& args);

}  // namespace ktune
