// xqa_decode kernel parameters: one POD struct passed by value to every entry point. Included by the host
// spec (C++17), by the device template (NVRTC) and by the host kernel (LLVM host backend: no system headers),
// so it uses only builtin types.
//
// Tensor layouts (all contiguous, row-major, element types fixed by the specialization):
//   q            [num_tokens, num_q_heads, head_dim]                         q dtype (bf16/fp16/e4m3)
//   kv_cache HND [num_pages, 2, num_kv_heads, page_size, head_dim]           kv dtype (bf16/fp16/e4m3)
//   kv_cache NHD [num_pages, 2, page_size, num_kv_heads, head_dim]
//                (index 0 of the "2" dimension is K, 1 is V)
//   block_tables [batch, max_pages_per_req] int32, seq_lens [batch] int32 (KV length incl. this step's tokens)
//   q_cu_seq_lens [batch + 1] int32 (ragged form) or null (uniform form: q_len_per_req tokens per request)
//   mask         explicit draft mask, uint16 pairs forming uint32 words (low half first), W = ceil(max_q_len/32)
//                words per query row (the problem's max_q_len: one row stride for every request; bit j of word w
//                = draft key 32w + j): uniform [batch, q_len_per_req, W*2], ragged [total_q, W*2]; null for
//                causal/none
//   sinks        [num_q_heads] fp32 logits (natural-log units) or null
//   out          [num_tokens, num_q_heads, head_dim] output dtype
//   lse          [num_tokens, num_q_heads] fp32 natural-log LSE of the scaled logits (sink included), or null
//   workspace    split-KV partials, size from the spec's workspace_bytes(); null when num_splits == 1
#pragma once

#include "common/checked.h"

#if !defined(__CUDACC_RTC__) && !defined(KTUNE_HOST_JIT)
#include <cstdint>
#endif

namespace ktune_xqa {

struct Params {
  const void* q;
  const void* kv_cache;
  const int* block_tables;
  const int* seq_lens;
  const int* q_cu_seq_lens;    // null => uniform
  const unsigned short* mask;  // null => implicit causal (or no mask when q_len == 1)
  const float* sinks;          // null => no sinks
  void* out;
  float* lse;                  // null => not written
  float* workspace;            // split-KV partial outputs + (max, sum) pairs
  int batch;
  int num_tokens;
  int q_len_per_req;           // uniform form; ignored when q_cu_seq_lens != null
  int max_pages_per_req;       // row stride of block_tables
  long long num_pages;         // pages in the cache (for checked builds)
  float bmm1_scale;            // softmax_scale * k_scale (* q_scale only when Q is FP8)
  float bmm2_scale;            // v_scale (/ o_scale for FP8 output)
  float softcap;               // > 0 => logits = softcap * tanh(logits / softcap), applied after bmm1_scale
  int window_left;             // >= 0 => key k visible to query at position p only if k >= p - window_left
  int num_splits;              // split-KV chunks per (request, kv head); gridDim.x == num_splits
  ktune_common::DeviceReport* report;  // checked kernels (Spec::kChecked) record bad indices here; else unused
};

}  // namespace ktune_xqa
