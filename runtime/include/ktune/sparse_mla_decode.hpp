// sparse_mla_decode, the engine-facing call: DeepSeek V3.2 sparse MLA decode (each query token attends to its
// own top-k cache slots; one latent KV head) launched through the runtime.
//
//   ktune::mla::Problem p;                 // static specialization (templates/sparse_mla_decode/spec.hpp)
//   p.num_heads = 128; p.topk = 2048; p.page_size = 64; p.kv_format = ktune::mla::KvFormat::Fp8DsMla;
//   ktune::SparseMlaDecodeArgs a;          // device pointers + runtime scalars
//   a.q = q; a.kv_cache = kv; a.indices = idx; a.out = out; a.lse = lse; a.num_tokens = T; a.num_pages = P;
//   a.softmax_scale = 1 / sqrt(576.f);
//   a.workspace = ws; a.workspace_bytes = ktune::sparse_mla_decode_workspace_bytes(rt, p, T);
//   auto op = ktune::mla::prepare(rt, p);  // once: validates the problem (ktune/op.hpp)
//   op.run(a, stream);                     // per call (ktune::sparse_mla_decode(rt, p, a, stream): one-shot)
//
// CUDA-graph safe: no device->host read, no allocation, no synchronization; the launch geometry depends only
// on the static problem and num_tokens. Every argument is checked on the host before any driver call; a bad
// one raises Error(Status::invalid_argument, "sparse_mla_decode", "<field>: expected ..., got ...").
// Semantics (docs/sparse_mla_decode.md): index -1 = skip; a token whose indices are all -1 gets O = 0 and
// LSE = -inf (with a sink: LSE = the sink logit); out-of-range slots are a caller error that the checked
// variant (problem.checked or KTUNE_CHECKED=1) reports through Runtime::take_device_fault and skips.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ktune/export.hpp"
#include "ktune/op.hpp"
#include "ktune/runtime.hpp"
#include "sparse_mla_decode/spec.hpp"

namespace ktune {

// Layouts: templates/sparse_mla_decode/params.h. All pointers are device pointers of the current CUDA context.
struct KTUNE_API SparseMlaDecodeArgs {
  const void* q = nullptr;           // [num_tokens, num_heads, kv_lora_rank + rope_dim] bf16 (16-byte aligned;
                                     // strides below)
  const void* kv_cache = nullptr;    // [num_pages, page_size, row_bytes] (16-byte aligned)
  const int32_t* indices = nullptr;  // [num_tokens, topk] physical slots page * page_size + offset, -1 = skip
  const float* sinks = nullptr;      // [num_heads] sink logits, or null (no sinks)
  void* out = nullptr;               // [num_tokens, num_heads, kv_lora_rank] bf16 (4-byte aligned)
  float* lse = nullptr;              // [num_tokens, num_heads] fp32, or null (not written)
  void* workspace = nullptr;         // split partials; >= sparse_mla_decode_workspace_bytes() when split
  size_t workspace_bytes = 0;
  int num_tokens = 0;                // query tokens (requests x MTP positions); 0 = nothing to do; <= 65535
  int64_t num_pages = 0;             // pages in kv_cache (slots = num_pages * page_size)
  float softmax_scale = 0;           // usually 1 / sqrt(kv_lora_rank + rope_dim)
  const char* config = nullptr;      // force a config key (the tuner/benches); nullptr = tuned or default
  int num_splits = 0;                // 0 = planned from num_tokens; else 1..64 (forced)
  // Strided q (e.g. a slice of a wider projection output): row (token t, head h) starts at element
  // t * q_stride_token + h * q_stride_head, the row contiguous. 0 = dense (num_heads * row, row); else multiples
  // of 8 elements (rows are loaded 16 bytes at a time).
  int64_t q_stride_token = 0, q_stride_head = 0;
};

using SparseMlaDecodePlan = LaunchPlan;

// The prepared op (ktune/op.hpp); op.plan(args) reads num_tokens, config and num_splits.
struct SparseMlaDecodeFamily {
  using Problem = mla::Problem; using Args = SparseMlaDecodeArgs; using Plan = SparseMlaDecodePlan;
  static constexpr const char* kName = "sparse_mla_decode";
};
using SparseMlaDecodeOp = Op<SparseMlaDecodeFamily>;
extern template class KTUNE_API Op<SparseMlaDecodeFamily>;
namespace mla { inline SparseMlaDecodeOp prepare(Runtime& rt, const Problem& p) { return SparseMlaDecodeOp::prepare(rt, p); } }

// What a call with num_tokens will run (needs a current CUDA context unless config and num_splits are forced).
KTUNE_API SparseMlaDecodePlan sparse_mla_decode_plan(Runtime& rt, const mla::Problem& problem, int num_tokens,
                                                     const char* config = nullptr, int num_splits = 0);
KTUNE_API size_t sparse_mla_decode_workspace_bytes(Runtime& rt, const mla::Problem& problem, int num_tokens,
                                                   const char* config = nullptr, int num_splits = 0);

// Enqueues the decode (and, when split, the combine) kernel on `stream` (a CUstream; nullptr = legacy default).
KTUNE_API void sparse_mla_decode(Runtime& rt, const mla::Problem& problem, const SparseMlaDecodeArgs& args,
                                 void* stream);

// The host-side argument check sparse_mla_decode runs first (no driver call). Throws Error(invalid_argument).
KTUNE_API void sparse_mla_decode_validate(const mla::Problem& problem, const SparseMlaDecodeArgs& args);

// The tuning bucket of a call: requests = ceil(num_tokens / max_q_len), rounded up to a power of two.
KTUNE_API int64_t sparse_mla_decode_batch_bucket(const mla::Problem& problem, int num_tokens);

}  // namespace ktune
