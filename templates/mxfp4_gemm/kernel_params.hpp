// The kernel parameters of one mxfp4_gemm call, for the GPU launch and the host launch alike (the GPU launch
// adds the activations' TMA map for the wgmma configs).
#pragma once

#include "ktune/mxfp4_gemm.hpp"
#include "mxfp4_gemm/params.h"

namespace ktune::mxfp4 {

inline ktune_mxfp4::Params kernel_params(const Problem& p, const Mxfp4GemmArgs& a) {
  ktune_mxfp4::Params prm{};
  prm.a = a.a;
  prm.w = static_cast<const unsigned*>(a.weight.packed);
  prm.s = static_cast<const unsigned*>(a.weight.scales);
  prm.bias = a.bias;
  prm.c = a.c;
  prm.expert_offsets = p.grouped() ? a.expert_offsets : nullptr;
  prm.m = a.m;
  prm.n = p.n;
  prm.k = p.k;
  prm.lda = a.lda ? a.lda : p.k;
  prm.ldc = a.ldc ? a.ldc : p.n;
  prm.kc = (p.k + 63) / 64;
  prm.n16 = (p.n + 15) / 16;
  prm.num_experts = p.num_experts;
  prm.w_expert_words = int64_t(packed_weight_bytes(p.n, p.k, 1) / 4);
  prm.s_expert_words = int64_t(packed_scale_bytes(p.n, p.k, 1) / 4);
  return prm;
}

}  // namespace ktune::mxfp4
