// The dense mxfp4_gemm Params of the dev harnesses (mxfp4_skinny.cu, mxfp4_wgmma.cu): m x k bf16 activations
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
