// The engine helpers of xqa_decode (draft-mask words, q_cu_seq_lens): parameters and the per-word rule, shared by
// the device kernels (helpers.cuh) and the host forms (helpers.cpp), so the two cannot disagree. Builtin types
// only (NVRTC, no system headers).
//
// Draft-mask words (docs/xqa_decode.md): per query row W = ceil(max_q_len / 32) 32-bit words stored as uint16
// pairs, low half first (a little-endian uint32); bit j of word w set => draft key 32w + j visible to the row.
// The row of query i of request b is start_b + i: uniform form start_b = b * q_len, ragged form
// start_b = q_cu_seq_lens[b]. A row of a request of n query tokens has bits only for keys < min(n, q_len).
#pragma once

#include "common/dtype.h"

namespace ktune_xqa {

// What the words of a row say: the caller's boolean mask, the causal pattern (key j visible to query i iff
// j <= i), or every key of the request visible.
enum DraftMaskSource : int { kMaskFromBool = 0, kMaskCausal = 1, kMaskFull = 2 };

struct DraftMaskParams {
  const unsigned char* bool_mask;  // [rows, q_len] 0 / nonzero (kMaskFromBool), else null
  const int* q_cu_seq_lens;        // [batch + 1] ragged form, or null: uniform, q_len rows per request
  unsigned short* out;             // [rows, words * 2]
  int source;                      // DraftMaskSource
  int q_len;                       // columns of bool_mask; uniform form: query tokens per request
  int rows;                        // rows of bool_mask and out (uniform form: batch * q_len)
  int batch;
};

struct CuSeqLensParams {
  const int* q_lens;   // [batch] query tokens per request
  int* q_cu_seq_lens;  // [batch + 1] exclusive prefix sum: [0, q_lens[0], q_lens[0] + q_lens[1], ...]
  int batch;
};

// Word w of the row of query i of a request with n query tokens (n already clamped to [0, max_q_len]).
KT_HD unsigned draft_mask_row_word(const DraftMaskParams& p, long long row, int i, int n, int w) {
  const int keys = n < p.q_len ? n : p.q_len;
  const int lo = 32 * w;
  int hi = keys - lo;
  if (hi <= 0) return 0u;
  if (hi > 32) hi = 32;
  unsigned word = 0u;
  if (p.source == kMaskFromBool) {
    const unsigned char* src = p.bool_mask + row * p.q_len + lo;
    for (int j = 0; j < hi; ++j) word |= (src[j] != 0 ? 1u : 0u) << j;
  } else {
    if (p.source == kMaskCausal) {
      const int upto = i - lo + 1;  // keys lo .. i
      if (upto < hi) hi = upto < 0 ? 0 : upto;
    }
    word = hi >= 32 ? 0xffffffffu : ((1u << hi) - 1u);
  }
  return word;
}

}  // namespace ktune_xqa
