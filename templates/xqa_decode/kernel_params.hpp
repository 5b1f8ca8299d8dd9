// The kernel parameters of one xqa_decode call, for the GPU launch and the host launch alike.
#pragma once

#include "ktune/xqa_decode.hpp"
#include "xqa_decode/params.h"

namespace ktune::xqa {

// Scales: bmm1 = softmax_scale * k_scale (* q_scale only for an FP8 Q); bmm2 = v_scale (/ o_scale only for an FP8
// output), each times its device-held form when given. `workspace` holds the split partials (null when unsplit).
inline ktune_xqa::Params kernel_params(const Problem& p, const XqaDecodeArgs& a, int splits, float* workspace) {
  namespace kc = ::ktune_common;
  ktune_xqa::Params prm{};
  prm.q = a.q;
  prm.kv_cache = a.kv_cache ? a.kv_cache : a.k_cache;
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
  prm.q_stride_token = a.q_stride_token, prm.q_stride_head = a.q_stride_head;
  prm.out_stride_token = a.out_stride_token, prm.out_stride_head = a.out_stride_head;
  if (!a.kv_cache) {  // the pair: validated distinct and 16-byte aligned, so the V distance is never 0
    prm.kv_page_stride = a.kv_page_stride ? a.kv_page_stride : (long long)p.num_kv_heads * p.page_size * p.head_dim;
    prm.kv_v_offset = static_cast<const char*>(a.v_cache) - static_cast<const char*>(a.k_cache);
  }
  prm.q_scale_ptr = p.q_dtype == kc::kE4M3 ? a.q_scale_ptr : nullptr;
  prm.k_scale_ptr = a.k_scale_ptr;
  prm.v_scale_ptr = a.v_scale_ptr;
  prm.o_scale_ptr = p.out_dtype == kc::kE4M3 ? a.o_scale_ptr : nullptr;
  return prm;
}

}  // namespace ktune::xqa
