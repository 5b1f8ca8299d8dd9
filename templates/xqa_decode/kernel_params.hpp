// The kernel parameters of one xqa_decode call, for the GPU launch and the host launch alike.
#pragma once

#include "ktune/xqa_decode.hpp"
#include "xqa_decode/params.h"

namespace ktune::xqa {

// Scales: bmm1 = softmax_scale * k_scale (* q_scale only for an FP8 Q); bmm2 = v_scale (/ o_scale only for an FP8
// output). `workspace` holds the split partials (null when unsplit).
inline ktune_xqa::Params kernel_params(const Problem& p, const XqaDecodeArgs& a, int splits, float* workspace) {
  namespace kc = ::ktune_common;
  ktune_xqa::Params prm{};
  prm.q = a.q;
  prm.kv_cache = a.kv_cache;
  prm.block_tables = a.block_tables;
  prm.seq_lens = a.seq_lens;
  prm.q_cu_seq_lens = a.q_cu_seq_lens;
  prm.mask = a.mask;
  prm.sinks = a.sinks;
  prm.out = a.out;
  prm.lse = a.lse;
  prm.workspace = splits > 1 ? workspace : nullptr;
  prm.batch = a.batch;
  prm.num_tokens = a.num_tokens;
  prm.q_len_per_req = a.q_len_per_req;
  prm.max_pages_per_req = a.max_pages_per_req;
  prm.num_pages = a.num_pages;
  prm.bmm1_scale = a.softmax_scale * a.k_scale * (p.q_dtype == kc::kE4M3 ? a.q_scale : 1.f);
  prm.bmm2_scale = a.v_scale / (p.out_dtype == kc::kE4M3 ? a.o_scale : 1.f);
  prm.softcap = p.softcap ? a.softcap : 0.f;
  prm.window_left = p.sliding_window ? a.window_left : -1;
  prm.num_splits = splits;
  prm.report = nullptr;
  return prm;
}

}  // namespace ktune::xqa
