// mxfp4_gemm on sm_100a through the tensor-memory block-scaled MMA (".tc", opt-in; compiled in CI, never run:
// no sm_100 device was available). Same problem, Params and prepacked weight (layout version 1) as kernel.cuh.
//
// One CTA of 4 warps computes 128 weight rows (the MMA M) x kBM tokens (the MMA N: 16..128) over the whole K,
// 128 k per stage, two shared-memory stages:
//   - all threads turn the stage's prepacked e2m1 fragments into e4m3 bytes (exact: common/mxfp4.h
//     e2m1x4_to_e4m3x4) in the K-major unswizzled operand layout, gather the weight rows' four e8m0 scales, and
//     quantize the activations to MXFP8 (per token and 32-block: the smallest e8m0 scale that keeps the block
//     within e4m3's 448, elements RNE; the rule of the sm_120a ".mx" path);
//   - one thread copies both scale blocks to tensor memory (tcgen05.cp) and issues four
//     tcgen05.mma.kind::mxf8f6f4.block_scale (K = 32 each: one 32-block, its scale byte chosen by the
//     instruction descriptor), accumulating in tensor memory, then commits them to the stage's mbarrier;
//   - a stage is refilled only after the mbarrier says the MMAs that read it are done, so filling stage s + 1
//     overlaps the MMAs of stage s.
// The k order inside each 32-block is the order of the prepacked fragments (a lane's word holds k 2t, 8+2t,
// 2t+1, 9+2t of its rows, t = lane % 4); the activations are written in the same order, and a 32-block's scale
// does not depend on the order, so the products are the right ones. Epilogue: warp w loads accumulator lanes
// 32w .. 32w + 31 (its weight rows), adds the bias, and stores each token's output.
#pragma once
#include "common/tcgen05.cuh"
#include "mxfp4_gemm/kernel.cuh"
#include "mxfp4_gemm/tc_stage.h"

namespace ktune_mxfp4 {

template <class Spec>
struct TcTile {
  static constexpr int kBM = Spec::kBM;  // tokens per CTA: the MMA N
  static constexpr int kStageBytes = tc_stage_bytes(kBM);
  // tensor-memory columns: the fp32 accumulator (kBM), then 4 + 4 per stage for the weight / activation scales
  static constexpr int kSfaCol = kBM, kSfbCol = kBM + 8;
  static constexpr int kCols = kBM + 16 <= 32 ? 32 : kBM + 16 <= 64 ? 64 : kBM + 16 <= 128 ? 128 : 256;
  static_assert(2 * kStageBytes + 128 == K<Spec>::kS.smem_total, "kernel_tc.cuh and shape.h disagree on smem");
};

template <int kAType>
KT_DEV float act_to_float(unsigned short h) {
  if constexpr (kAType == kc::kBF16) return kc::bf16_to_float(h);
  else return kc::fp16_to_float(h);
}

template <class Spec>
__global__ void __launch_bounds__(128, 1) gemm_kernel_tc(const __grid_constant__ Params p) {
  using T = TcTile<Spec>;
  constexpr int kBM = T::kBM;
  extern __shared__ __align__(16) unsigned char smem[];  // (kernel.cuh declares it; aligned to 128 below)
  __shared__ int tile_info[3];
  __shared__ alignas(8) unsigned long long mma_done[2];  // per stage: its four MMAs completed
  __shared__ unsigned tmem_slot;
  const int tid = threadIdx.x, warp = tid / 32;
  ktune_common::pdl_wait();  // every input may be written by the kernel before this one on the stream

  int m0, m1, expert;
  if (!cta_rows<kBM, Spec::kGrouped>(p, tile_info, expert, m0, m1)) return;
#if KT_TCGEN05
  const unsigned raw = kc::smem_u32(smem);
  const unsigned base = (raw + 127u) & ~127u;
  unsigned char* const sp = smem + (base - raw);
  const unsigned bar[2] = {kc::smem_u32(&mma_done[0]), kc::smem_u32(&mma_done[1])};

  if (tid == 0) {
    kc::mbar_init(bar[0], 1);
    kc::mbar_init(bar[1], 1);
  }
  if (warp == 0) kc::tc_alloc(kc::smem_u32(&tmem_slot), T::kCols);
  // activation scale words of the token rows past kBM (never read by an N = kBM MMA, copied all the same): 1.0
  for (int st = 0; st < 2; ++st)
    if (tid >= kBM)
      *reinterpret_cast<unsigned*>(sp + st * T::kStageBytes + tc_sfb_offset(kBM) + tc_scale_off(tid)) = 0x7F7F7F7Fu;
  kc::tc_fence_before();
  __syncthreads();
  kc::tc_fence_after();
  const unsigned tmem = tmem_slot;

  const unsigned* __restrict__ wexp = p.w + (long long)expert * p.w_expert_words;
  const unsigned char* __restrict__ sexp =
      reinterpret_cast<const unsigned char*>(p.s + (long long)expert * p.s_expert_words);
  const unsigned short* __restrict__ a = static_cast<const unsigned short*>(p.a);
  const int nt0 = blockIdx.x * 8;       // the CTA's first 16-row weight tile
  const int nstages = (p.kc + 1) / 2;   // 128-k steps

  for (int ks = 0; ks < nstages; ++ks) {
    const int st = ks & 1;
    unsigned char* const pa = sp + st * T::kStageBytes;
    const unsigned sa = base + st * T::kStageBytes;
    if (ks >= 2) kc::mbar_wait(bar[st], ((ks - 2) >> 1) & 1);  // the MMAs of step ks - 2 no longer read it

    // weight: 2 chunks (64 k) x 8 tiles (16 rows) x 32 lanes of 16 bytes
    for (int it = tid; it < 2 * 8 * 32; it += 128) {
      const int c = 2 * ks + (it >> 8), nt = nt0 + ((it >> 5) & 7);
      uint4 w = make_uint4(0u, 0u, 0u, 0u);
      if (c < p.kc && nt < p.n16)
        w = __ldg(reinterpret_cast<const uint4*>(wexp + ((long long)c * p.n16 + nt) * 128 + (it & 31) * 4));
      const unsigned ws[4] = {w.x, w.y, w.z, w.w};
      tc_store_weight(pa, it, ws);
    }
    // weight scales: thread tid is weight row tid of the tile
    *reinterpret_cast<unsigned*>(pa + tc_sfa_offset(kBM) + tc_scale_off(tid)) =
        tc_weight_scale_word(sexp, p.n16, p.kc, nt0 * 16 + tid, ks);
    // activations to MXFP8: one (token, 32-block) per item
    for (int it = tid; it < kBM * 4; it += 128) {
      const int j = it >> 2, b = it & 3;
      const int row = m0 + j, k0 = ks * 128 + 32 * b;
      float x[32];
      if (row < m1 && k0 < p.k) {
        const uint4* src = reinterpret_cast<const uint4*>(a + (long long)row * p.lda + k0);
#pragma unroll
        for (int q = 0; q < 4; ++q) {
          const uint4 v = __ldg(src + q);
          const unsigned u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            x[8 * q + 2 * e] = act_to_float<Spec::kAType>((unsigned short)(u[e] & 0xFFFFu));
            x[8 * q + 2 * e + 1] = act_to_float<Spec::kAType>((unsigned short)(u[e] >> 16));
          }
        }
      } else {
#pragma unroll
        for (int e = 0; e < 32; ++e) x[e] = 0.f;
      }
      tc_store_activations(pa + tc_b_offset(), pa + tc_sfb_offset(kBM), j, b, x);
    }

    kc::fence_proxy_async_smem();  // these generic stores are read by tcgen05.cp / tcgen05.mma (async proxy)
    __syncthreads();
    if (tid == 0) {
      kc::tc_fence_after();
      const unsigned sfa = tmem + T::kSfaCol + 4 * st, sfb = tmem + T::kSfbCol + 4 * st;
      // scale blocks: 32 rows of 16 bytes, 128 bytes apart; operands: LBO 128 (next 16 k), SBO 1024 (next 8 rows)
      kc::tc_copy_scales(sfa, kc::tc_smem_desc(sa + tc_sfa_offset(kBM), 0, 128));
      kc::tc_copy_scales(sfb, kc::tc_smem_desc(sa + tc_sfb_offset(kBM), 0, 128));
      const unsigned sb = sa + tc_b_offset();
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        kc::tc_mma_mx(tmem, kc::tc_smem_desc(sa + 256 * kk, 128, 1024), kc::tc_smem_desc(sb + 256 * kk, 128, 1024),
                      kc::tc_idesc_e4m3(kBM, kk, kk), sfa, sfb, ks > 0 || kk > 0);
      kc::tc_commit(bar[st]);
    }
  }

  const int last = nstages - 1;
  kc::mbar_wait(bar[last & 1], (last >> 1) & 1);  // its commit covers every MMA issued before it
  kc::tc_fence_after();

  // epilogue: warp w holds accumulator lanes (weight rows) 32w .. 32w + 31
  const int n = nt0 * 16 + tid;
  const float bias = (p.bias && n < p.n) ? load_bias<Spec::kOutType>(p.bias, (long long)expert * p.n + n) : 0.f;
#pragma unroll 1
  for (int j0 = 0; j0 < kBM; j0 += 8) {
    float v[8];
    kc::tc_load_8cols(tmem + (unsigned(32 * warp) << 16) + unsigned(j0), v);
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int m = m0 + j0 + j;
      if (m < m1 && n < p.n) store_out<Spec::kOutType>(p.c, (long long)m * p.ldc + n, v[j] + bias);
    }
  }
  kc::tc_fence_before();
  __syncthreads();
  if (warp == 0) {
    kc::tc_fence_after();
    kc::tc_dealloc(tmem, T::kCols);
  }
#endif
}

}  // namespace ktune_mxfp4
