// CPU reference for xqa_decode: fp64 accumulation over host arrays laid out exactly as params.h documents.
#pragma once

#include <vector>

#include "xqa_decode/params.h"
#include "xqa_decode/spec.hpp"

namespace ktune::test {

struct XqaRefResult {
  std::vector<double> out;      // [num_tokens, num_q_heads, head_dim], before the output dtype rounding
  std::vector<double> lse;      // [num_tokens, num_q_heads]
  std::vector<unsigned char> written;  // [num_tokens]: 1 if the kernel must write this token's rows
};

// `p` holds HOST pointers (q, kv_cache, block_tables, seq_lens, q_cu_seq_lens, mask, sinks); out/lse/workspace
// are ignored. Semantics (the kernel's contract):
//  - request b: n = q_cu_seq_lens[b+1]-q_cu_seq_lens[b] (ragged) or q_len_per_req, L = seq_lens[b];
//    n <= 0 or L <= 0: nothing is written. n is clamped to problem.max_q_len.
//  - query i (position L-n+i) sees key k < L if k < L-n (context) or the draft key j = k-(L-n) passes the mask
//    (causal: j <= i; explicit: bit j of the row's word) and, with a window, k >= L-n+i-window_left.
//  - logit = q.k * bmm1_scale, softcapped as cap*tanh(logit/cap) when softcap > 0 (and problem.softcap);
//    sinks add exp(sink) to the denominator only; out = sum(p v) / denom * bmm2_scale; lse = log(denom).
//  - a row with no visible key and no sink: out = 0, lse = -inf.
XqaRefResult xqa_reference(const ktune::xqa::Problem& problem, const ktune_xqa::Params& p, int threads = 0);

// Relative L2 error over the written rows; max_row returns the worst per-row relative error.
struct XqaCompare {
  double rel_l2 = 0, max_row_rel = 0, lse_max_abs = 0;
  long long nonfinite = 0;      // NaN/inf in rows that must be written (poison left behind)
  long long clobbered = 0;      // bytes changed in rows that must not be written
};
// out_dev: the kernel's output bytes (out dtype), poison: the byte the buffer was filled with.
XqaCompare xqa_compare(const ktune::xqa::Problem& problem, const XqaRefResult& ref, const void* out_dev,
                       const float* lse_dev, unsigned char poison);

}  // namespace ktune::test
