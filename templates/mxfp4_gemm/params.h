// mxfp4_gemm kernel parameters: one POD struct passed by value. Included by the host spec (C++17) and by the
// device template (NVRTC), so it uses only builtin types.
//
// C[m, n] = sum_k A[m, k] * W[n, k] (+ bias[n]) with W in OCP MXFP4 (templates/common/mxfp4.h).
//   a        [m_total, k] a dtype (bf16/fp16), row stride lda elements (16-byte aligned rows)
//   w        prepacked weight (layout version kLayoutVersion, see prepack.cpp):
//            [experts][kc][n16][32 lanes][4 words] (chunk-major: at any moment the GPU streams one band of
//            the weight), n16 = ceil(n/16), kc = ceil(k/64); word s of lane l holds
//            the 8 e2m1 codes of the m16n8k16 A fragment of k16 step s: code j / j+4 (j = 0..3) = row
//            l/4 + 8*(j&1), columns 64c + 16s + 2(l%4) + 8(j>>1) + {0, 1}
//   s        prepacked scales: [experts][n16][ceil(kc/4)][32 lanes] uint32; lane l of group g holds, for chunk
//            c = 4g + l%4, the bytes (row l/4, block 2c), (row l/4+8, block 2c), (row l/4, 2c+1), (row l/4+8, 2c+1)
//   bias     [experts, n] out dtype, or null
//   c        [m_total, n] out dtype, row stride ldc elements
//   expert_offsets [experts + 1] int32 on the device (grouped form), or null (dense). Rows
//            [off[e], off[e+1]) of A and C belong to expert e; values are clamped to [0, m_total] and made
//            non-decreasing on the device, so a bad table cannot make the kernel read or write out of bounds.
#pragma once

namespace ktune_mxfp4 {

// Bump when the prepacked layout changes: a weight packed for another version is refused by the launch.
constexpr int kLayoutVersion = 1;

struct Params {
  const void* a;
  const unsigned* w;
  const unsigned* s;
  const void* bias;
  void* c;
  const int* expert_offsets;
  int m;             // rows of A and C (grouped: all experts' rows together)
  int n, k;
  int lda, ldc;      // row strides in elements
  int kc;            // ceil(k / 64)
  int n16;           // ceil(n / 16)
  int num_experts;
  long long w_expert_words;  // uint32 words of w per expert
  long long s_expert_words;  // uint32 words of s per expert
  // wgmma configs (sm_90a): the CUtensorMap (128 bytes) of A that the K loop's TMA loads read: bf16 [m, k] with
  // row stride lda, box 64 (k) x bm (rows), 128-byte swizzle, zeros outside. Filled by the launch; unused
  // otherwise. The kernel takes Params as a __grid_constant__ so the map stays in parameter space.
  alignas(64) unsigned long long a_tmap[16];
};

}  // namespace ktune_mxfp4
