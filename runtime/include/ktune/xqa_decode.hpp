// xqa_decode, the engine-facing call: paged-KV decode attention launched through the runtime.
//
//   ktune::xqa::Problem p;                 // static specialization (templates/xqa_decode/spec.hpp)
//   p.num_q_heads = 32; p.num_kv_heads = 8; p.max_q_len = 4; ...
//   ktune::XqaDecodeArgs a;                // device pointers + runtime scalars
//   a.q = q; a.kv_cache = kv; ...; a.batch = B; a.num_tokens = B * 4; a.q_len_per_req = 4;
//   a.max_seq_len = 8192;                  // host-known upper bound of seq_lens
//   a.workspace = ws; a.workspace_bytes = ktune::xqa_decode_workspace_bytes(rt, p, B, 8192);
//   auto op = ktune::xqa::prepare(rt, p);  // once: validates the problem (ktune/op.hpp)
//   op.run(a, stream);                     // per call: checks the arguments, launches
//
// ktune::xqa_decode(rt, p, a, stream) is the one-shot form of the same pipeline.
//
// CUDA-graph safe: no device->host read, no allocation, no synchronization. The launch geometry (config,
// split count, grid) depends only on the static problem, `batch` and the power-of-two bucket of `max_seq_len`,
// so a graph captured for one (batch, max_seq_len bucket) replays correctly for any seq_lens <= max_seq_len.
// Warm up once before capturing: the first call of a kernel key loads its module (and compiles it on a cache
// miss when JIT is allowed).
//
// Every argument is checked on the host before any driver call; a bad one raises
// Error(Status::invalid_argument, "xqa_decode", "<field>: <expected>, got <value>").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "ktune/export.hpp"
#include "ktune/op.hpp"
#include "ktune/runtime.hpp"
#include "xqa_decode/spec.hpp"

namespace ktune {

// Layouts: templates/xqa_decode/params.h. All pointers are device pointers of the current CUDA context.
// Strides are in elements; the forms engines hold (strided q/out, a K/V pair, device scales) are the fields at
// the end (docs/xqa_decode.md, "Argument forms").
struct KTUNE_API XqaDecodeArgs {
  const void* q = nullptr;                 // [num_tokens, num_q_heads, head_dim] q dtype (strides below)
  const void* kv_cache = nullptr;          // combined paged cache [num_pages, 2, ...] HND or NHD (16-byte aligned),
                                           // or null when the (k_cache, v_cache) pair is given
  const int32_t* block_tables = nullptr;   // [batch, max_pages_per_req]
  const int32_t* seq_lens = nullptr;       // [batch], KV length incl. this step's tokens, each <= max_seq_len
  const int32_t* q_cu_seq_lens = nullptr;  // [batch + 1] ragged form; null = uniform (q_len_per_req each)
  const uint16_t* mask = nullptr;          // explicit draft mask (problem.mask == explicit: ceil(max_q_len/32)
                                           // uint32 words a query row as uint16 pairs, params.h), else null
  const float* sinks = nullptr;            // [num_q_heads] iff problem.has_sinks
  void* out = nullptr;                     // [num_tokens, num_q_heads, head_dim] out dtype (8-byte aligned;
                                           // e4m3: 4-byte), strides below
  float* lse = nullptr;                    // [num_tokens, num_q_heads] iff problem.write_lse
  void* workspace = nullptr;               // split-KV partials; >= xqa_decode_workspace_bytes() when splits > 1
  size_t workspace_bytes = 0;
  int batch = 0;                           // requests (>= 1; zero-length requests are allowed: padding)
  int num_tokens = 0;                      // uniform: exactly batch * q_len_per_req; ragged: total query tokens
  int q_len_per_req = 1;                   // uniform form: 1..problem.max_q_len
  int max_pages_per_req = 0;               // row stride of block_tables
  int64_t num_pages = 0;                   // pages in kv_cache (pair: in each of k_cache and v_cache)
  int max_seq_len = 0;  // host-known upper bound of seq_lens: picks the tuning bucket and split count (no device read)
  float softmax_scale = 0;                 // usually 1/sqrt(head_dim)
  float q_scale = 1, k_scale = 1, v_scale = 1, o_scale = 1;  // q_scale: FP8 Q only; o_scale: FP8 output only
  float softcap = 0;                       // > 0 iff problem.softcap
  int window_left = -1;                    // 0..2^30 iff problem.sliding_window, else -1
  const char* config = nullptr;            // force a config key (the tuner/benches); nullptr = tuned or default
  int num_splits = 0;                      // 0 = planned from batch and max_seq_len; else 1..1024 (forced)

  // Strided q and out (e.g. q a slice of a fused QKV buffer): row (token t, q head h) starts at element
  // t * stride_token + h * stride_head; head_dim is contiguous. 0 = the dense default (num_q_heads * head_dim,
  // head_dim). Out strides are multiples of 4 elements (out is stored 4 values at a time); out rows must not
  // overlap. lse stays dense [num_tokens, num_q_heads].
  int64_t q_stride_token = 0, q_stride_head = 0;
  int64_t out_stride_token = 0, out_stride_head = 0;
  // K and V as a pair instead of kv_cache (exactly one form): pages of [num_kv_heads, page_size, head_dim] (HND)
  // or [page_size, num_kv_heads, head_dim] (NHD), page i of K at k_cache + i * kv_page_stride elements, of V at
  // v_cache + i * kv_page_stride. kv_page_stride 0 = dense pages (num_kv_heads * page_size * head_dim); else a
  // multiple of 16 bytes. Covers kv[0], kv[1] of a [2, num_pages, ...] tensor, two tensors, and the views
  // kv[:, 0], kv[:, 1] of the combined cache (kv_page_stride = 2 pages). 16-byte aligned, k_cache != v_cache.
  const void* k_cache = nullptr;
  const void* v_cache = nullptr;
  int64_t kv_page_stride = 0;
  // Scales held on the device (one fp32 each, 4-byte aligned, or null): read by the kernel on every launch and
  // multiplied with the float forms above, so a captured CUDA graph replays with the value of the moment.
  // q_scale_ptr, like q_scale, applies only to an FP8 Q, and o_scale_ptr only to an FP8 output (ignored else).
  const float* q_scale_ptr = nullptr;
  const float* k_scale_ptr = nullptr;
  const float* v_scale_ptr = nullptr;
  const float* o_scale_ptr = nullptr;
};

// The shape fields op.plan(args) reads: batch, max_seq_len, config, num_splits.
// What a call with these arguments will run (no launch; needs a current CUDA context for the device's limits
// and tuned configs, unless both `config` and `num_splits` are forced).
using XqaDecodePlan = LaunchPlan;

// The prepared op (ktune/op.hpp): ktune::xqa::prepare(rt, problem), then op.run(args, stream).
struct XqaDecodeFamily {
  using Problem = xqa::Problem; using Args = XqaDecodeArgs; using Plan = XqaDecodePlan;
  static constexpr const char* kName = "xqa_decode";
};
using XqaDecodeOp = Op<XqaDecodeFamily>;
extern template class KTUNE_API Op<XqaDecodeFamily>;
namespace xqa { inline XqaDecodeOp prepare(Runtime& rt, const Problem& p) { return XqaDecodeOp::prepare(rt, p); } }

KTUNE_API XqaDecodePlan xqa_decode_plan(Runtime& rt, const xqa::Problem& problem, int batch, int max_seq_len,
                                        const char* config = nullptr, int num_splits = 0);

// Workspace bytes a call with (batch, max_seq_len[, config, num_splits]) needs; 0 when it runs unsplit.
KTUNE_API size_t xqa_decode_workspace_bytes(Runtime& rt, const xqa::Problem& problem, int batch, int max_seq_len,
                                            const char* config = nullptr, int num_splits = 0);

// Enqueues the decode (and, when split, the combine) kernel on `stream` (a CUstream; nullptr = legacy default).
// Scales: bmm1 = softmax_scale * k_scale (* q_scale only for an FP8 Q); bmm2 = v_scale (/ o_scale only for an
// FP8 output).
KTUNE_API void xqa_decode(Runtime& rt, const xqa::Problem& problem, const XqaDecodeArgs& args, void* stream);

// The host-side argument check xqa_decode runs first (no driver call). Throws Error(invalid_argument).
KTUNE_API void xqa_decode_validate(const xqa::Problem& problem, const XqaDecodeArgs& args);

}  // namespace ktune
