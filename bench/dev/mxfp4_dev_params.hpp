// mxfp4_gemm Params for the dev harnesses. Dense (mxfp4_skinny.cu, mxfp4_wgmma.cu): m x k bf16 activations
// with packed rows (lda = k, ldc = n), one expert, no bias. The caller sets w and s (and a_tmap for wgmma specs).
#pragma once
#include "mxfp4_gemm/params.h"

inline ktune_mxfp4::Params dense_dev_params(const void* a, void* c, int m, int n, int k) {
  ktune_mxfp4::Params p{};
  p.a = a;
  p.c = c;
  p.m = m;
  p.n = n;
  p.k = k;
  p.lda = k;
  p.ldc = n;
  p.kc = k / 64;
  p.n16 = n / 16;
  p.num_experts = 1;
  return p;
}

// Packed weight and scale bytes of E experts of n x k (params.h layout version 1: 512 bytes per 16 x 64 chunk, one
// 128-byte scale word group per 16 rows and 4 chunks; n and k padded to 16 and 64).
inline void packed_dev_bytes(int n, int k, int experts, size_t* wbytes, size_t* sbytes) {
  const long long kc = (k + 63) / 64, n16 = (n + 15) / 16;
  *wbytes = size_t(kc * n16 * 512) * experts;
  *sbytes = size_t(n16 * ((kc + 3) / 4) * 128) * experts;
}

// Params of a dense (experts == 0) or grouped call on packed weights w, s; any n and k (k % 32 == 0).
inline ktune_mxfp4::Params packed_dev_params(const void* a, void* c, const unsigned* w, const unsigned* s, int m, int n,
                                             int k, int experts, const int* offsets) {
  ktune_mxfp4::Params p = dense_dev_params(a, c, m, n, k);
  p.kc = (k + 63) / 64;
  p.n16 = (n + 15) / 16;
  p.w = w;
  p.s = s;
  p.num_experts = experts ? experts : 1;
  p.expert_offsets = experts ? offsets : nullptr;
  p.w_expert_words = (long long)p.kc * p.n16 * 128;
  p.s_expert_words = (long long)p.n16 * ((p.kc + 3) / 4) * 32;
  return p;
}
