// Engine helpers of xqa_decode: the draft-mask words and q_cu_seq_lens built on the GPU, through a prepared op.
//
//   auto op = ktune::xqa::prepare(rt, problem);          // problem.mask == explicit for the mask helpers
//   ktune::xqa::DraftMaskArgs m;                          // [rows, q_len] uint8 0/1 -> mask words
//   m.bool_mask = d_bool; m.out = d_words; m.batch = B; m.q_len = 4; m.rows = B * 4;
//   ktune::xqa::pack_draft_mask(op, m, stream);
//   ktune::xqa::build_q_cu_seq_lens(op, d_q_lens, B, d_q_cu_seq_lens, stream);
//
// The kernels are entry points of the problem's shared module (Op::shared_module, beside the split-KV combine):
// a cache warmed up for the problem serves them with no compile, also under KTUNE_JIT=0. A launch enqueues on
// `stream` (a CUstream; nullptr = the legacy default stream) and never allocates, synchronizes or reads device
// data on the host: capturable in a CUDA graph once that module is loaded (any earlier helper or decode call of
// the op on this context loads it). On a thread where use_device(kHostDevice) is current the same calls take HOST
// pointers and run the host forms, synchronously.
//
// Every argument is checked on the host before any driver call: Error(invalid_argument, "xqa_decode",
// "<field>: <expected>, got <value>"). Device data (q_cu_seq_lens, q_lens) is trusted as the decode trusts it and
// clamped so that nothing is written out of bounds (docs/xqa_decode.md); the host forms reject bad entries.
#pragma once

#include <cstdint>

#include "ktune/export.hpp"
#include "ktune/xqa_decode.hpp"

namespace ktune::xqa {

// W: 32-bit words per mask row, ceil(problem.max_q_len / 32). A row is W uint16 pairs, low half first (one
// little-endian uint32 per word); bit j of word w set => draft key 32w + j visible to that query row.
KTUNE_API int draft_mask_words(const Problem& problem);

// What pack_draft_mask writes into each row.
enum class DraftMaskSource : int {
  FromBool = 0,  // bool_mask[row][j] != 0 => key j visible
  Causal = 1,    // key j visible to query i iff j <= i (a chain of draft tokens)
  Full = 2,      // every key of the request visible
};

struct KTUNE_API DraftMaskArgs {
  const uint8_t* bool_mask = nullptr;      // [rows, q_len] 0 / nonzero (FromBool); null for Causal and Full
  const int32_t* q_cu_seq_lens = nullptr;  // [batch + 1] ragged form; null = uniform (q_len rows per request)
  uint16_t* out = nullptr;                 // [rows, W * 2] mask words (4-byte aligned)
  DraftMaskSource source = DraftMaskSource::FromBool;
  int batch = 0;  // requests, 1..65535
  int q_len = 0;  // columns of bool_mask, 1..problem.max_q_len; uniform form: query tokens of every request
  int rows = 0;   // rows of bool_mask and out: uniform exactly batch * q_len; ragged 0..batch * max_q_len (0:
                  // nothing is done, and the pointers may be null)
};

// Writes the W words of every query row of every request: row start_b + i for query i of request b (uniform
// start_b = b * q_len, ragged start_b = q_cu_seq_lens[b]); a row of a request of n query tokens has bits only for
// keys < min(n, q_len), all higher bits cleared. Ragged rows past q_cu_seq_lens[batch] are not written.
// Needs an op whose problem mask is explicit.
KTUNE_API void pack_draft_mask(const XqaDecodeOp& op, const DraftMaskArgs& args, void* stream);

// q_cu_seq_lens[batch + 1] = the exclusive prefix sum of q_lens[batch] (int32), in one launch for any batch
// (0..kMaxHelperBatch; batch 0 writes q_cu_seq_lens[0] = 0). Entries must lie in [0, problem.max_q_len].
KTUNE_API void build_q_cu_seq_lens(const XqaDecodeOp& op, const int32_t* q_lens, int batch, int32_t* q_cu_seq_lens,
                                   void* stream);
constexpr int kMaxHelperBatch = 1 << 24;

// The host forms (HOST pointers, synchronous; no runtime, no device): what the calls above run on the host
// device, and the CPU reference of the kernels. They check the data too: a q_cu_seq_lens or q_lens entry out of
// range is Error(invalid_argument) naming the entry, and nothing is written.
KTUNE_API void pack_draft_mask_host(const Problem& problem, const DraftMaskArgs& args);
KTUNE_API void build_q_cu_seq_lens_host(const Problem& problem, const int32_t* q_lens, int batch,
                                        int32_t* q_cu_seq_lens);

}  // namespace ktune::xqa
