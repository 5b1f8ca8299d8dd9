// The kernel parameters of one sparse_mla_decode call, for the GPU launch and the host launch alike.
#pragma once

#include "ktune/sparse_mla_decode.hpp"
#include "sparse_mla_decode/params.h"

namespace ktune::mla {

// `workspace` holds the split partials (null when unsplit).
inline ktune_mla::Params kernel_params(const Problem& p, const SparseMlaDecodeArgs& a, int splits, float* workspace) {
  ktune_mla::Params prm{};
  prm.q = a.q;
  prm.kv_cache = a.kv_cache;
  prm.indices = a.indices;
  prm.sinks = a.sinks;
  prm.out = a.out;
  prm.lse = a.lse;
  prm.workspace = splits > 1 ? workspace : nullptr;
  prm.num_tokens = a.num_tokens;
  prm.num_splits = splits;
  prm.num_slots = a.num_pages * p.page_size;
  prm.softmax_scale = a.softmax_scale;
  prm.report = nullptr;
  prm.q_stride_token = a.q_stride_token, prm.q_stride_head = a.q_stride_head;
  return prm;
}

}  // namespace ktune::mla
