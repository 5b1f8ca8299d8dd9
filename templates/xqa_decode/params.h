// xqa_decode kernel parameters: one POD struct passed by value to every entry point. Included by the host
// spec (C++17), by the device template (NVRTC) and by the host kernel (LLVM host backend: no system headers),
// so it uses only builtin types.
//
// Tensor layouts (row-major, element types fixed by the specialization; strides in elements):
//   q            [num_tokens, num_q_heads, head_dim]  q dtype (bf16/fp16/e4m3); row (token t, head h) starts at
//                t * q_stride_token + h * q_stride_head, head_dim contiguous (0 strides: dense)
//   K and V pages, each [num_kv_heads, page_size, head_dim] (HND) or [page_size, num_kv_heads, head_dim] (NHD),
//                kv dtype (bf16/fp16/e4m3): K of page i at kv_cache + i * kv_page_stride, its V page
//                kv_v_offset bytes after it. The combined cache [num_pages, 2, page...] (index 0 of the "2"
//                dimension is K, 1 is V) is kv_page_stride = 2 * page elements, kv_v_offset = one page's bytes
//                (0 for both: that default)
//   block_tables [batch, max_pages_per_req] int32, seq_lens [batch] int32 (KV length incl. this step's tokens)
//   q_cu_seq_lens [batch + 1] int32 (ragged form) or null (uniform form: q_len_per_req tokens per request)
//   mask         explicit draft mask, uint16 pairs forming uint32 words (low half first), W = ceil(max_q_len/32)
//                words per query row (the problem's max_q_len: one row stride for every request; bit j of word w
//                = draft key 32w + j): uniform [batch, q_len_per_req, W*2], ragged [total_q, W*2]; null for
//                causal/none
//   sinks        [num_q_heads] fp32 logits (natural-log units) or null
//   out          [num_tokens, num_q_heads, head_dim] output dtype, strided like q (out_stride_token/_head)
//   lse          [num_tokens, num_q_heads] fp32 natural-log LSE of the scaled logits (sink included), or null
//   workspace    split-KV partials, size from the spec's workspace_bytes(); null when num_splits == 1
//   *_scale_ptr  one fp32 each or null, read by the kernels and multiplied with bmm1_scale (q, k) or bmm2_scale
//                (v; o divides): scales that change between CUDA-graph replays
#pragma once

#include "common/checked.h"

#if !defined(__CUDACC_RTC__) && !defined(KTUNE_HOST_JIT)
#include <cstdint>
#endif

namespace ktune_xqa {

struct Params {
  const void* q;
  const void* kv_cache;        // K of page 0 (the combined cache's base)
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
  long long q_stride_token, q_stride_head;      // elements; 0 => dense (num_q_heads * head_dim, head_dim)
  long long out_stride_token, out_stride_head;  // elements; 0 => dense
  long long kv_page_stride;  // elements from one K page to the next; 0 => the combined cache (2 pages' elements)
  long long kv_v_offset;     // bytes from a K page to its V page; 0 => the combined cache (one page's bytes)
  const float* q_scale_ptr;  // FP8 Q only (null otherwise): bmm1 *= *q_scale_ptr
  const float* k_scale_ptr;  // bmm1 *= *k_scale_ptr
  const float* v_scale_ptr;  // bmm2 *= *v_scale_ptr
  const float* o_scale_ptr;  // FP8 output only (null otherwise): bmm2 /= *o_scale_ptr
};

// The scales of a call: the float forms times the device-held ones (read once per CTA / work item).
struct Scales {
  float bmm1, bmm2;
};
KT_HD Scales load_scales(const Params& p) {
  Scales s{p.bmm1_scale, p.bmm2_scale};
  if (p.q_scale_ptr) s.bmm1 *= *p.q_scale_ptr;
  if (p.k_scale_ptr) s.bmm1 *= *p.k_scale_ptr;
  if (p.v_scale_ptr) s.bmm2 *= *p.v_scale_ptr;
  if (p.o_scale_ptr) s.bmm2 /= *p.o_scale_ptr;
  return s;
}

// Request b's geometry: n query tokens starting at q_start (at most the problem's max_q_len) and L KV tokens
// (this step's included), from the uniform or the ragged form.
struct Request {
  int q_start, n, L;
};
KT_HD Request load_request(const Params& p, int b, int max_q_len) {
  Request r;
  if (p.q_cu_seq_lens) {
    r.q_start = p.q_cu_seq_lens[b];
    r.n = p.q_cu_seq_lens[b + 1] - r.q_start;
  } else {
    r.n = p.q_len_per_req;
    r.q_start = b * r.n;
  }
  r.L = p.seq_lens[b];
  if (r.n > max_q_len) r.n = max_q_len;
  return r;
}

}  // namespace ktune_xqa
