// mxfp4_gemm device template (sm_80+; measured on sm_90a): W4A16 GEMM with OCP MXFP4 weights.
//
// "Swap AB" on m16n8k16 mma.sync: the weight is the 16-row A operand (rows = output columns n), the
// activations are the 8-column B operand (columns = tokens), so a 1..16 token GEMM wastes no weight bandwidth.
// Each lane loads its prepacked weight fragments with one 16-byte load per (16 rows x 64 k) chunk straight
// into registers, `kDepth` chunks ahead of use; e2m1 codes become 16-bit floats with shifts, a mask and one
// fma (common/mxfp4.h). BF16 with >= 32 tokens: the e8m0 scale is applied to the decoded weight (exact: a power
// of two in the bf16 range) before the mma. BF16 with few tokens: a chunk whose scales are all <= 1 (trained
// weights) is decoded and scaled by that one fma (its factor 2^126 becomes 2^(e-1)); any other chunk, and FP16
// (scales mostly outside the fp16 range), accumulates each 32-block on its own and scales it in fp32.
// Activation tiles stream through a cp.async ring of `kStages` stages (XOR swizzled for ldmatrix); `kStages == 0` (few tokens, bm <= 16) loads each lane's
// activation fragments straight from global memory (L1-cached, `kDepth` chunks ahead like the weight), so no
// warp ever waits at a CTA barrier inside the K loop. Weight and activation loads are `asm volatile`
// (common/global_load.cuh) so the prefetch stays where it is written. Warps split the CTA's N tile (kWN) and its K step (kWK, reduced in shared memory in a fixed
// order: deterministic). Grouped (MoE) form: blockIdx.y enumerates (expert, m tile) pairs found on the device
// from expert_offsets, so no host read is needed and the launch is CUDA-graph safe.
//
// kWgmma (sm_90a, bf16, many tokens): the same weight fragments, decoded and pre-scaled, are the register A
// operand of wgmma m64 x bm x k16 (each warpgroup: 64 weight rows, its 4 warps' 16-row tiles); the activation
// tile (the 128-byte-swizzle K-major layout wgmma reads) is B. Activation tiles arrive by TMA (one thread
// issues a 64 x bm box per chunk onto the stage's transaction mbarrier; Params::a_tmap), kStages - 2 chunks
// ahead, so the stage being refilled is never one a wgmma may still read. The packed weight streams into a
// shared-memory ring of kDepth slots (one bulk copy per chunk: the CTA's 16-row tiles are contiguous in the
// prepacked layout), kDepth - 1 chunks ahead, on mbarriers of its own; each lane then reads its 16-byte fragment
// from the slot. Weight in flight thus costs no registers (with it in registers, kDepth 4 cost a CTA per SM).
// Per 64-wide K chunk the warpgroup issues 4 wgmma and keeps one chunk in flight while it decodes the next
// (fragments double-buffered); a grouped tile shorter than kBM (an expert's last) issues the smallest N that
// covers its rows. With kWK > 1 several warpgroups share the same 64 weight rows, each taking every kWK-th chunk
// (a stage holds one TMA box per warpgroup, a weight slot one chunk per warpgroup); their partial sums meet in the
// shared-memory reduction of the mma.sync path.
//
// kNative (".mx", sm_120a, opt-in; compiled, never run here): the same loads and loop, but each 32-block is one
// block-scaled m16n8k32 mma.sync (e2m1 weight x e4m3 activations, common/mma.cuh mma_mx_e2m1_e4m3): the weight
// codes only move into byte containers and the tensor core applies both e8m0 scales. Activations are quantized
// to MXFP8 in registers (per token and 32-block: the quad's amax -> e8m0 scale -> e4m3, common/mxfp4.h). The
// prepacked layout needs no change: within one mma, A and B only have to agree on which k each slot holds,
// and a lane's bytes (codes 0, 2, 4, 6 of word s, then of word s + 1) are k 2t, 8+2t, 2t+1, 9+2t (+16), which
// is also the order its B bytes are packed in.
#pragma once
#include "common/async_copy.cuh"
#include "common/dtype.h"
#include "common/global_load.cuh"
#include "common/mma.cuh"
#include "common/mxfp4.h"
#include "common/numerics.cuh"
#include "common/pdl.cuh"
#include "common/tma.cuh"
#include "common/wgmma.cuh"
#include "mxfp4_gemm/params.h"
#include "mxfp4_gemm/shape.h"

namespace ktune_mxfp4 {

namespace kc = ::ktune_common;

template <class Spec>
struct K {
  static constexpr Shape kS = make_shape(Spec::kBM, Spec::kTN, Spec::kWN, Spec::kWK, Spec::kStages, Spec::kDepth,
                                         Spec::kAType, Spec::kWgmma, Spec::kNative, Spec::kTcgen05);
  static_assert(shape_error(kS) == nullptr, "invalid mxfp4_gemm shape (see shape_error)");
  static constexpr bool kBF16 = Spec::kAType == kc::kBF16;
  // BF16 with >= 32 tokens: the e8m0 scale goes into the decoded bf16 weight (cost per weight, shared by all
  // tokens). Few tokens or FP16: each 32-block is accumulated on its own and scaled in fp32 (cheaper than a
  // second fma per weight when the weight feeds only one or two 8-token mma tiles; fp16 cannot hold the scales).
  static constexpr bool kNative = Spec::kNative;
  static constexpr bool kPreScale = kBF16 && Spec::kBM > 16 && !kNative;
  // BF16 few tokens, chunks whose scales are all <= 1 (e < 128; trained weights' scales sit far below): the
  // decode's fma multiplies by 2^(e-1) instead of 2^126, which decodes and scales in one rounding-free step (the
  // exact product is a bf16 value), and the chunk accumulates straight into acc. Other chunks take the fp32 path.
  static constexpr bool kFold = kBF16 && !kPreScale && !kNative;
  // Activation fragments from global memory, no shared-memory ring (few tokens).
  static constexpr bool kDirect = Spec::kStages == 0;
  static constexpr int kMT = Spec::kBM / 8;          // 8-token mma tiles
  static constexpr int kRowChunks = 8 * Spec::kWK;   // 16-byte chunks per smem A row
  static constexpr int kRowBytes = 16 * kRowChunks;
  static constexpr int kStageBytes = Spec::kBM * kRowBytes;
  static constexpr int kThreads = kS.threads;
};

template <bool B>
struct BoolTag {
  static constexpr bool value = B;
};

// kWgmma: one K chunk's 4 wgmma m64 x N x k16 (one commit group), A = the decoded fragments af, B = the activation
// tile at descriptor `desc`. Fence and commit are inside: at a join of branches that issue different N, ptxas
// would add a warpgroup.arrive of its own.
template <int N>
KT_DEV void wgmma_chunk(float* acc, const unsigned (&af)[4][4], unsigned long long desc) {
  kc::wg_fence();
#pragma unroll
  for (int s = 0; s < 4; ++s) kc::wgmma_rs<N, true, false>(acc, af[s], desc + (unsigned)((s * 32) >> 4), 1);
  kc::wg_commit();
}
// ... with the smallest N of {32, 64, ..., kMax} (kMax: the wgmma bm, a multiple of 32) that covers `rows`, the
// CTA's tile rows. A grouped tile with fewer rows than kBM (an expert's last) then multiplies only the 32-row
// groups it has: an expert of 140 rows in a 192-row tile costs 160 rows of tensor work, not 192.
template <int kMax>
KT_DEV void wgmma_chunk_rows(int rows, float* acc, const unsigned (&af)[4][4], unsigned long long desc) {
  if constexpr (kMax > 32) {
    if (rows <= kMax - 32) {
      wgmma_chunk_rows<kMax - 32>(rows, acc, af, desc);
      return;
    }
  }
  wgmma_chunk<kMax>(acc, af, desc);
}

// bf16x2 bits of 2^(e-1), both halves, for the scale byte `byte` (0..3) of the word sc; exact and normal for e
// in 0..128, where 2^(e-1) = 2^126 (the decode's factor) * 2^(e-127) (the scale).
KT_DEV unsigned fold_multiplier(unsigned sc, int byte) {
  return (__byte_perm(sc, 0u, 0x4040u | unsigned(byte) | (unsigned(byte) << 8)) << 7) + 0x3F003F00u;
}

// The K loop of every path: body(it, d) for it = 0 .. nit-1, d = it % kDepth. The d loop is unrolled, so d is a
// compile-time constant in the body and the register arrays it indexes (weights in flight) stay in registers.
template <int kDepth, class Body>
KT_DEV void for_each_chunk(int nit, Body&& body) {
  for (int base = 0; base < nit; base += kDepth) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d)
      if (base + d < nit) body(base + d, d);
  }
}

template <int kOut>
KT_DEV void store_out(void* c, long long i, float v) {
  if constexpr (kOut == kc::kBF16) static_cast<unsigned short*>(c)[i] = kc::float_to_bf16(v);
  else static_cast<unsigned short*>(c)[i] = kc::float_to_fp16(v);
}
template <int kOut>
KT_DEV float load_bias(const void* b, long long i) {
  const unsigned short h = static_cast<const unsigned short*>(b)[i];
  if constexpr (kOut == kc::kBF16) return kc::bf16_to_float(h);
  else return kc::fp16_to_float(h);
}

// Which rows (and expert) CTA (blockIdx.x, blockIdx.y) computes: dense, rows blockIdx.y * kBM .. + kBM clipped
// to m; grouped, blockIdx.y enumerates the (expert, kBM-row tile) pairs found from expert_offsets by warp 0
// (prefix sums over the experts; the table is clamped and made non-decreasing, so a bad one cannot send a CTA out
// of bounds). Returns false for a CTA with nothing to do (a spare tile of the upper-bound grid). Every thread of
// the CTA calls it (grouped: one CTA barrier).
template <int kBM, bool kGrouped>
KT_DEV bool cta_rows(const Params& p, int* tile_info, int& expert, int& m0, int& m1) {
  expert = 0;
  if constexpr (kGrouped) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp == 0) {
      const int t = blockIdx.y;
      int found_e = -1, found_m0 = 0, found_m1 = 0, before = 0, prev_hi = 0;
      for (int base = 0; base < p.num_experts && found_e < 0; base += 32) {
        const int e = base + lane;
        int lo = 0, hi = 0;
        if (e < p.num_experts) {
          lo = min(max(p.expert_offsets[e], 0), p.m);
          hi = min(max(p.expert_offsets[e + 1], 0), p.m);
        }
        // non-decreasing: a row range starts where the previous one ended at the earliest
        int run_lo = lo;
        for (int o = 1; o < 32; o *= 2) {
          const int v = __shfl_up_sync(0xffffffffu, run_lo, o);
          if (lane >= o) run_lo = max(run_lo, v);
        }
        run_lo = max(run_lo, prev_hi);
        hi = max(hi, run_lo);
        lo = run_lo;
        const int tiles = e < p.num_experts ? (hi - lo + kBM - 1) / kBM : 0;
        int incl = tiles;
        for (int o = 1; o < 32; o *= 2) {
          const int v = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += v;
        }
        const int excl = before + incl - tiles;
        const bool mine = tiles > 0 && t >= excl && t < excl + tiles;
        const unsigned ballot = __ballot_sync(0xffffffffu, mine);
        if (ballot) {
          const int src = __ffs(ballot) - 1;
          const int my_m0 = lo + (t - excl) * kBM;
          found_e = __shfl_sync(0xffffffffu, e, src);
          found_m0 = __shfl_sync(0xffffffffu, my_m0, src);
          found_m1 = __shfl_sync(0xffffffffu, hi, src);
        }
        before = __shfl_sync(0xffffffffu, before + incl, 31);
        prev_hi = __shfl_sync(0xffffffffu, hi, 31);
      }
      if (lane == 0) {
        tile_info[0] = found_e;
        tile_info[1] = found_m0;
        tile_info[2] = min(found_m1, found_m0 + kBM);
      }
    }
    __syncthreads();
    expert = tile_info[0];
    if (expert < 0) return false;
    m0 = tile_info[1];
    m1 = tile_info[2];
  } else {
    m0 = blockIdx.y * kBM;
    m1 = min(m0 + kBM, p.m);
  }
  return m0 < m1;
}

template <class Spec>
__global__ void __launch_bounds__(K<Spec>::kThreads, K<Spec>::kS.min_blocks)
    gemm_kernel(const __grid_constant__ Params p) {
  using KS = K<Spec>;
  constexpr int kBM = Spec::kBM, kTN = Spec::kTN, kWK = Spec::kWK, kStages = Spec::kStages, kDepth = Spec::kDepth;
  constexpr int kMT = KS::kMT;
  constexpr bool kBF16 = KS::kBF16;
  constexpr bool kPreScale = KS::kPreScale;
  constexpr bool kDirect = KS::kDirect;
  constexpr bool kFold = KS::kFold;
  extern __shared__ __align__(16) unsigned char smem[];
  __shared__ int tile_info[3];
  __shared__ alignas(8) unsigned long long tma_bar[Spec::kWgmma ? Spec::kStages : 1];  // wgmma: stage full
  __shared__ alignas(8) unsigned long long w_bar[Spec::kWgmma ? Spec::kDepth : 1];     // wgmma: weight slot full
  // s0 (few tokens, fp32 per-block scaling): 2^(e-127) for every e8m0 byte is looked up in shared memory instead
  // of converted. The conversion's two special cases (0 -> the subnormal 2^-127, 0xFF -> NaN) cost ~5 ALU-pipe
  // instructions per scale, and the ALU pipe is what limits this kernel at few tokens. The ring configs measured
  // slower with the table, so they keep the conversion (shape.h: Shape::scale_table; docs/mxfp4_gemm.md).
  constexpr bool kScaleTable = KS::kS.scale_table;
  __shared__ float e8m0_f32[kScaleTable ? 256 : 1];
  ktune_common::pdl_wait();  // every input may be written by the kernel before this one on the stream

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // mma.sync: warp = wn * kWK + wk. wgmma: the 4 warps of a warpgroup share wk (their K slice) and own 4
  // consecutive 16-row tiles, warpgroup = (wn / 4) * kWK + wk.
  const int wk = Spec::kWgmma ? (warp / 4) % kWK : warp % kWK;
  const int wn = Spec::kWgmma ? (warp / 4) / kWK * 4 + warp % 4 : warp / kWK;

  // ---- which rows (and expert) this CTA computes
  int m0, m1, expert;
  if (!cta_rows<kBM, Spec::kGrouped>(p, tile_info, expert, m0, m1)) return;
  if constexpr (kScaleTable) {
    for (int e = tid; e < 256; e += KS::kThreads) e8m0_f32[e] = kc::e8m0_to_f32(unsigned(e));
    __syncthreads();
  }

  const unsigned* __restrict__ wbase = p.w + (long long)expert * p.w_expert_words;
  const unsigned* __restrict__ sbase = p.s + (long long)expert * p.s_expert_words;
  const int groups = (p.kc + 3) / 4;
  const int ntile0 = (blockIdx.x * Spec::kWN + wn) * kTN;  // first 16-row weight tile of this warp
  const int nit = (p.kc + kWK - 1) / kWK;
  const unsigned short* __restrict__ a = static_cast<const unsigned short*>(p.a);
  // (wgmma: stages 1024-byte aligned; the host spec adds the 1024 bytes to the dynamic size)
  const unsigned smem_base = Spec::kWgmma ? (kc::smem_u32(smem) + 1023u) & ~1023u : kc::smem_u32(smem);

  // ---- activation tile loader: rows m0.., k from it * 64 * kWK, zero-filled outside [m0, m1) x [0, k)
  auto load_a = [&](int slot, int it) {
    constexpr int kTotal = kBM * KS::kRowChunks;
#pragma unroll
    for (int idx0 = 0; idx0 < kTotal; idx0 += KS::kThreads) {
      const int idx = idx0 + tid;
      if (kTotal % KS::kThreads == 0 || idx < kTotal) {
        const int r = idx / KS::kRowChunks, ch = idx % KS::kRowChunks;
        const int kk = it * 64 * kWK + ch * 8;
        const bool ok = m0 + r < m1 && kk < p.k;
        const unsigned short* src = ok ? a + (long long)(m0 + r) * p.lda + kk : a;
        const unsigned dst = smem_base + slot * KS::kStageBytes + r * KS::kRowBytes + ((ch ^ (r & 7)) * 16);
        kc::cp_async_16(dst, src, ok ? 16 : 0);
      }
    }
  };

  // ---- weight + scale loader (registers), `it` = CTA iteration
  // A load that is off (K slot past the end, weight tile past N) leaves its registers as they were. With one warp
  // along K (kWK == 1) every computed chunk has c < kc, so stale registers are only ever read for tiles past N,
  // which still hold the zeros and 1.0 scales set once here and are never stored: no per-chunk zero fill. With
  // kWK > 1 the last iteration computes K slots past the end, which must add nothing: those are zero-filled.
  constexpr bool kFillOffLoads = kWK > 1;
  constexpr int kRegDepth = Spec::kWgmma ? 1 : kDepth;  // wgmma: the weight waits in shared memory instead
  uint4 wq[kRegDepth][kTN];
  unsigned ws[kRegDepth][kTN];
#pragma unroll
  for (int d = 0; d < kRegDepth; ++d)
#pragma unroll
    for (int i = 0; i < kTN; ++i) {
      wq[d][i] = make_uint4(0u, 0u, 0u, 0u);
      ws[d][i] = 0x7F7F7F7Fu;
    }
  // One address per chunk for the weight (its tiles are 128 words apart: immediate offsets) and one for the
  // scales (rows groups * 32 words apart); the strides fit in int (n, k <= 2^20: spec.cpp).
  const unsigned* __restrict__ wlane = wbase + (long long)ntile0 * 128 + lane * 4;
  const int w_chunk_words = p.n16 * 128, s_row_words = groups * 32;
  auto load_w = [&](int it, uint4 (&q)[kTN], unsigned (&s)[kTN]) {
    const int c = it * kWK + wk;
    const unsigned* wc = wlane + (long long)c * w_chunk_words;
    const unsigned* sc = sbase + ((long long)ntile0 * s_row_words + (c >> 2) * 32 + lane);
#pragma unroll
    for (int i = 0; i < kTN; ++i) {
      const bool ok = c < p.kc && ntile0 + i < p.n16;
      if constexpr (kFillOffLoads) {
        q[i] = make_uint4(0u, 0u, 0u, 0u);
        s[i] = 0x7F7F7F7Fu;
      }
      kc::ld_stream_v4(q[i], wc + i * 128, ok);
      kc::ld_cached_u32(s[i], sc + i * s_row_words, ok);
    }
  };

  // ---- kDirect: this lane's B fragments of chunk `it` for every 8-token tile j, straight from global memory.
  // bq[j][2s + h] = the two bf16/fp16 of token m0 + 8j + lane/4 at k = 64c + 16s + 2(lane%4) + 8h (+0, +1),
  // the m16n8k16 B fragment of k16 step s; zero outside [m0, m1) x [0, k).
  // (stale registers of an off load: rows past m1 keep these zeros and are never stored; the upper half of a
  // chunk past k keeps activations of an earlier chunk of the same rows, which meet the prepack's zero codes
  // there: x * 0 = 0 for finite x, NaN for an infinity (docs/mxfp4_gemm.md, Numerics))
  unsigned bq[kDirect ? kDepth : 1][kMT][8];
#pragma unroll
  for (int d = 0; d < (kDirect ? kDepth : 1); ++d)
#pragma unroll
    for (int j = 0; j < kMT; ++j)
#pragma unroll
      for (int x = 0; x < 8; ++x) bq[d][j][x] = 0u;
  const unsigned short* arow[kMT];  // this lane's token rows (row m0 for a row past m1: never loaded)
  bool rok[kMT];
#pragma unroll
  for (int j = 0; j < kMT; ++j) {
    const int row = m0 + 8 * j + lane / 4;
    rok[j] = row < m1;
    arow[j] = a + (long long)(rok[j] ? row : m0) * p.lda + 2 * (lane % 4);
  }
  auto load_b = [&](int it, unsigned (&b)[kMT][8]) {
    const int c = it * kWK + wk;
    const bool okc = c < p.kc, okh = c * 64 + 32 < p.k;  // k16 steps 0, 1 / 2, 3 of the chunk (k % 32 == 0)
#pragma unroll
    for (int j = 0; j < kMT; ++j) {
      const unsigned short* src = arow[j] + c * 64;
#pragma unroll
      for (int s = 0; s < 4; ++s) {
        const bool ok = rok[j] && okc && (s < 2 || okh);
        if constexpr (kFillOffLoads) {
          b[j][2 * s] = 0u;
          b[j][2 * s + 1] = 0u;
        }
        kc::ld_cached_u32(b[j][2 * s], src + 16 * s, ok);
        kc::ld_cached_u32(b[j][2 * s + 1], src + 16 * s + 8, ok);
      }
    }
  };

  float acc[kTN][kMT][4];
#pragma unroll
  for (int i = 0; i < kTN; ++i)
#pragma unroll
    for (int j = 0; j < kMT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;

  // ---- kNative: block sp / 2 of the chunk (k16 steps sp, sp + 1; b as in compute) as block-scaled mma. The
  // quad of lanes holding one token's 32 values agrees on its e8m0 scale (amax over the quad), quantizes its 8
  // values to e4m3 and packs them in the k order of the weight bytes: 2t, 8+2t, 2t+1, 9+2t (then +16).
  auto native_block = [&](int sp, const uint4 (&q)[kTN], const unsigned (&sc)[kTN], const unsigned (&b)[kMT][4]) {
    if constexpr (KS::kNative) {
      unsigned bx[kMT][2], sb[kMT];
#pragma unroll
      for (int j = 0; j < kMT; ++j) {
        float v[8];  // b[j][x] = the 16-bit pair (k 2t + 8(x&1), +1) of step sp + x/2
#pragma unroll
        for (int x = 0; x < 4; ++x) {
          if constexpr (kBF16) {
            v[2 * x] = kc::f32_from_bits(b[j][x] << 16);
            v[2 * x + 1] = kc::f32_from_bits(b[j][x] & 0xFFFF0000u);
          } else {
            v[2 * x] = kc::fp16_to_float((unsigned short)(b[j][x] & 0xFFFFu));
            v[2 * x + 1] = kc::fp16_to_float((unsigned short)(b[j][x] >> 16));
          }
        }
        float amax = 0.f;
#pragma unroll
        for (int x = 0; x < 8; ++x) amax = fmaxf(amax, fabsf(v[x]));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
        amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
        sb[j] = kc::mxfp8_scale_byte(amax);
        const float f = kc::mxfp8_inv_scale(sb[j]);
        bx[j][0] = kc::pack_e4m3x4(v[0] * f, v[2] * f, v[1] * f, v[3] * f);
        bx[j][1] = kc::pack_e4m3x4(v[4] * f, v[6] * f, v[5] * f, v[7] * f);
      }
#pragma unroll
      for (int i = 0; i < kTN; ++i) {
        const unsigned w0 = sp == 0 ? q[i].x : q[i].z, w1 = sp == 0 ? q[i].y : q[i].w;
        // codes 0, 2, 4, 6 (row lane/4) and 1, 3, 5, 7 (row lane/4 + 8) of each word, one per byte, bits 5..2
        const unsigned af[4] = {(w0 << 2) & 0x3C3C3C3Cu, (w0 >> 2) & 0x3C3C3C3Cu, (w1 << 2) & 0x3C3C3C3Cu,
                                (w1 >> 2) & 0x3C3C3C3Cu};
        // scale word bytes (row r, block 2c), (row r+8, 2c), (row r, 2c+1), (row r+8, 2c+1): lane 4r keeps row r's
        // in bytes 0 / 2, lane 4r + 1 shifts row r + 8's there
        const unsigned sa = sc[i] >> (8 * (lane & 1));
#pragma unroll
        for (int j = 0; j < kMT; ++j) {
          if (sp == 0) kc::mma_mx_e2m1_e4m3<0>(acc[i][j], af, bx[j][0], bx[j][1], sa, sb[j]);
          else kc::mma_mx_e2m1_e4m3<2>(acc[i][j], af, bx[j][0], bx[j][1], sa, sb[j]);
        }
      }
    }
  };

  auto compute = [&](int slot, int it, const uint4 (&q)[kTN], const unsigned (&sw)[kTN],
                     const unsigned (&bd)[kMT][8]) {
    const int c = it * kWK + wk;
    // No early exit for a K slot past the end (c >= kc, last iteration only): its weights and scales were loaded
    // as 0 and 1.0 and its activations as 0, so it adds nothing, and a branch here (around the shuffle) costs
    // ~8% at few tokens.
    unsigned sc[kTN];
#pragma unroll
    for (int i = 0; i < kTN; ++i) sc[i] = __shfl_sync(0xffffffffu, sw[i], (lane & ~3) | (c & 3));
    // kFold: the whole warp takes one path per chunk (mma.sync needs all 32 lanes), the folded one when every
    // scale of the chunk's tiles is at most 1 (e < 128).
    bool fold = false;
    if constexpr (kFold) {
      unsigned any = 0;
#pragma unroll
      for (int i = 0; i < kTN; ++i) any |= sc[i];
      fold = !__any_sync(0xffffffffu, (any & 0x80808080u) != 0u);
    }
    // The chunk's body, once per path: kF folds the scales into the decode, else each 32-block is accumulated on
    // its own (tmp) and scaled in fp32.
    auto chunk = [&](auto path) {
      constexpr bool kF = decltype(path)::value;
      [[maybe_unused]] float tmp[kPreScale ? 1 : kTN][kPreScale ? 1 : kMT][4];
#pragma unroll
      for (int sp = 0; sp < 4; sp += 2) {  // two k16 steps per ldmatrix.x4
        unsigned b[kMT][4];
#pragma unroll
        for (int j = 0; j < kMT; ++j) {
          if constexpr (kDirect) {
#pragma unroll
            for (int x = 0; x < 4; ++x) b[j][x] = bd[j][2 * sp + x];
          } else {
            const int r = 8 * j + (lane & 7);
            const int ch = wk * 8 + 2 * sp + (lane >> 3);
            kc::ldmatrix_x4(b[j], smem_base + slot * KS::kStageBytes + r * KS::kRowBytes + ((ch ^ (r & 7)) * 16));
          }
        }
        if constexpr (KS::kNative) {  // block sp / 2 of the chunk: one block-scaled mma per (weight tile, token tile)
          native_block(sp, q, sc, b);
          continue;
        }
        if constexpr (!kPreScale && !kF) {
#pragma unroll
          for (int i = 0; i < kTN; ++i)
#pragma unroll
            for (int j = 0; j < kMT; ++j)
#pragma unroll
              for (int r = 0; r < 4; ++r) tmp[i][j][r] = 0.f;
        }
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int s = sp + h;
#pragma unroll
          for (int i = 0; i < kTN; ++i) {
            const unsigned word = s == 0 ? q[i].x : s == 1 ? q[i].y : s == 2 ? q[i].z : q[i].w;
            unsigned af[4];
            if constexpr (kF) {  // af * 2^(e-1): decode and scale in one fma (see kFold)
              const unsigned m0 = fold_multiplier(sc[i], 2 * (s >> 1)), m1 = fold_multiplier(sc[i], 2 * (s >> 1) + 1);
              af[0] = kc::bf16x2_fma(kc::e2m1x2_raw<0, true>(word), m0, 0x80008000u);
              af[1] = kc::bf16x2_fma(kc::e2m1x2_raw<1, true>(word), m1, 0x80008000u);
              af[2] = kc::bf16x2_fma(kc::e2m1x2_raw<2, true>(word), m0, 0x80008000u);
              af[3] = kc::bf16x2_fma(kc::e2m1x2_raw<3, true>(word), m1, 0x80008000u);
#pragma unroll
              for (int j = 0; j < kMT; ++j) kc::mma_16816<true>(acc[i][j], af, b[j][2 * h], b[j][2 * h + 1]);
              continue;
            }
            if constexpr (kBF16) {
              af[0] = kc::bf16x2_fma(kc::e2m1x2_raw<0, true>(word), 0x7E807E80u, 0x80008000u);
              af[1] = kc::bf16x2_fma(kc::e2m1x2_raw<1, true>(word), 0x7E807E80u, 0x80008000u);
              af[2] = kc::bf16x2_fma(kc::e2m1x2_raw<2, true>(word), 0x7E807E80u, 0x80008000u);
              af[3] = kc::bf16x2_fma(kc::e2m1x2_raw<3, true>(word), 0x7E807E80u, 0x80008000u);
            } else {
              af[0] = kc::f16x2_fma(kc::e2m1x2_raw<0, false>(word), 0x74007400u, 0x80008000u);
              af[1] = kc::f16x2_fma(kc::e2m1x2_raw<1, false>(word), 0x74007400u, 0x80008000u);
              af[2] = kc::f16x2_fma(kc::e2m1x2_raw<2, false>(word), 0x74007400u, 0x80008000u);
              af[3] = kc::f16x2_fma(kc::e2m1x2_raw<3, false>(word), 0x74007400u, 0x80008000u);
            }
            if constexpr (kPreScale) {
              const unsigned kb = (sc[i] >> (16 * (s >> 1))) & 0xFFFFu;  // (row r0, row r1) scale bytes of block s/2
              const unsigned s0 = kc::e8m0_to_bf16x2(kb & 0xFFu), s1 = kc::e8m0_to_bf16x2(kb >> 8);
              af[0] = kc::bf16x2_fma(af[0], s0, 0x80008000u);
              af[1] = kc::bf16x2_fma(af[1], s1, 0x80008000u);
              af[2] = kc::bf16x2_fma(af[2], s0, 0x80008000u);
              af[3] = kc::bf16x2_fma(af[3], s1, 0x80008000u);
#pragma unroll
              for (int j = 0; j < kMT; ++j) kc::mma_16816<true>(acc[i][j], af, b[j][2 * h], b[j][2 * h + 1]);
            } else {
#pragma unroll
              for (int j = 0; j < kMT; ++j) kc::mma_16816<kBF16>(tmp[i][j], af, b[j][2 * h], b[j][2 * h + 1]);
            }
          }
        }
        if constexpr (!kPreScale && !kF) {  // one 32-block done: scale in fp32
#pragma unroll
          for (int i = 0; i < kTN; ++i) {
            // bytes (row r0, block), (row r1, block) of the chunk's 32-block sp / 2
            const unsigned e0 = (sc[i] >> (8 * sp)) & 0xFFu, e1 = (sc[i] >> (8 * sp + 8)) & 0xFFu;
            const float f0 = kScaleTable ? e8m0_f32[e0] : kc::e8m0_to_f32(e0);
            const float f1 = kScaleTable ? e8m0_f32[e1] : kc::e8m0_to_f32(e1);
#pragma unroll
            for (int j = 0; j < kMT; ++j) {
              acc[i][j][0] = fmaf(tmp[i][j][0], f0, acc[i][j][0]);
              acc[i][j][1] = fmaf(tmp[i][j][1], f0, acc[i][j][1]);
              acc[i][j][2] = fmaf(tmp[i][j][2], f1, acc[i][j][2]);
              acc[i][j][3] = fmaf(tmp[i][j][3], f1, acc[i][j][3]);
            }
          }
        }
      }
    };
    if constexpr (kFold) {
      if (fold) chunk(BoolTag<true>{});
      else chunk(BoolTag<false>{});
    } else {
      chunk(BoolTag<false>{});
    }
  };

  // ---- kWgmma: decode chunk `it` into the A fragments of its 4 k16 steps (pre-scaled), then issue the 4 wgmma
  // (one commit group) against activation stage `slot`. A full tile issues m64 x kBM x k16; a shorter one the
  // smallest N that covers its rows (wgmma_chunk_rows), a choice made per chunk: that branch costs ~7% of a full
  // tile's time, so full tiles run a K loop of their own without it.
  auto compute_wg = [&](int slot, int it, const uint4 (&q)[kTN], const unsigned (&sw)[kTN], unsigned (&af)[4][4],
                        bool full) {
    if constexpr (Spec::kWgmma) {
      const unsigned sc = __shfl_sync(0xffffffffu, sw[0], (lane & ~3) | ((it * kWK + wk) & 3));
      // The decode: each fragment register's two raw codes times 2^126 (the e2m1 value), times its row's scale.
      // When every scale the warp's lanes hold for this chunk is at most 1 (e < 128: trained weights, and the
      // tuning workload), both factors are one: 2^(e-1) (fold_multiplier), the kFold step of the mma.sync path,
      // exact for the same reason; that drops one multiply per register and the e8m0 conversion with its special
      // cases. The branch is warp-uniform and ends before the wgmma.
      auto decode = [&](auto folded) {
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          const unsigned word = s == 0 ? q[0].x : s == 1 ? q[0].y : s == 2 ? q[0].z : q[0].w;
          unsigned s0, s1;  // (row r0, row r1) factors of block s/2
          if constexpr (decltype(folded)::value) {
            s0 = fold_multiplier(sc, 2 * (s >> 1));
            s1 = fold_multiplier(sc, 2 * (s >> 1) + 1);
          } else {
            const unsigned kb = (sc >> (16 * (s >> 1))) & 0xFFFFu;
            s0 = kc::e8m0_to_bf16x2(kb & 0xFFu);
            s1 = kc::e8m0_to_bf16x2(kb >> 8);
          }
#pragma unroll
          for (int x = 0; x < 4; ++x) {
            const unsigned v = x == 0   ? kc::e2m1x2_raw<0, true>(word)
                               : x == 1 ? kc::e2m1x2_raw<1, true>(word)
                               : x == 2 ? kc::e2m1x2_raw<2, true>(word)
                                        : kc::e2m1x2_raw<3, true>(word);
            if constexpr (decltype(folded)::value)
              af[s][x] = kc::bf16x2_fma(v, x % 2 ? s1 : s0, 0x80008000u);
            else
              af[s][x] = kc::bf16x2_fma(kc::bf16x2_fma(v, 0x7E807E80u, 0x80008000u), x % 2 ? s1 : s0, 0x80008000u);
          }
        }
      };
      if (__all_sync(0xffffffffu, (sc & 0x80808080u) == 0u)) decode(BoolTag<true>{});
      else decode(BoolTag<false>{});
      // this warpgroup's K slice: sub-tile wk (bm rows x 64 k) of the stage; only the rows the tile has
      const unsigned long long desc = kc::wg_desc_k128(smem_base + slot * KS::kStageBytes + wk * kBM * 128);
      if (full) wgmma_chunk<kBM>(&acc[0][0][0], af, desc);  // a constant in each K loop (k_loop)
      else wgmma_chunk_rows<kBM>(m1 - m0, &acc[0][0][0], af, desc);
    }
  };

  // ---- intra-CTA split-K reduction (fixed order) and epilogue. Every warp parks its partial sums in shared
  // memory; then all threads of the CTA share the outputs, each summing the kWK partials of its elements in warp
  // order (((w0 + w1) + w2) ...: deterministic) and storing them. Only elements inside [m0, m1) x [0, n) are
  // summed (at M = 1, one in eight). Sharing the sums keeps the epilogue short at wk16, where one warp summing
  // every element took a noticeable part of a few-token call.
  auto store_tile = [&]() {
    if constexpr (kWK > 1) {
      __syncthreads();  // the ring's stages are reused
      float* red = reinterpret_cast<float*>(smem);
      constexpr int kPer = kTN * kMT * 4 * 32;  // partial sums per warp: (i, j, r) x lane
      {
        float* dst = red + (wk * Spec::kWN + wn) * kPer;
#pragma unroll
        for (int i = 0; i < kTN; ++i)
#pragma unroll
          for (int j = 0; j < kMT; ++j)
#pragma unroll
            for (int r = 0; r < 4; ++r) dst[((i * kMT + j) * 4 + r) * 32 + lane] = acc[i][j][r];
      }
      __syncthreads();
      for (int e = tid; e < Spec::kWN * kPer; e += KS::kThreads) {
        const int wn_e = e / kPer, rest = e % kPer, l = rest % 32, idx = rest / 32;  // idx = (i * kMT + j) * 4 + r
        const int r = idx % 4, j = (idx / 4) % kMT, i = idx / (4 * kMT);
        const int n = ((blockIdx.x * Spec::kWN + wn_e) * kTN + i) * 16 + l / 4 + 8 * (r >> 1);
        const int m = m0 + 8 * j + 2 * (l % 4) + (r & 1);
        if (n >= p.n || m >= m1) continue;
        const float* src = red + wn_e * kPer + rest;
        float v = src[0];
#pragma unroll
        for (int w = 1; w < kWK; ++w) v += src[w * Spec::kWN * kPer];
        const float bias = p.bias ? load_bias<Spec::kOutType>(p.bias, (long long)expert * p.n + n) : 0.f;
        store_out<Spec::kOutType>(p.c, (long long)m * p.ldc + n, v + bias);
      }
    } else {  // one warp per output tile: straight from the accumulators
#pragma unroll
      for (int i = 0; i < kTN; ++i) {
#pragma unroll
        for (int hr = 0; hr < 2; ++hr) {
          const int n = (ntile0 + i) * 16 + lane / 4 + 8 * hr;
          if (n >= p.n) continue;
          const float bias = p.bias ? load_bias<Spec::kOutType>(p.bias, (long long)expert * p.n + n) : 0.f;
#pragma unroll
          for (int j = 0; j < kMT; ++j)
#pragma unroll
            for (int hc = 0; hc < 2; ++hc) {
              const int m = m0 + 8 * j + 2 * (lane % 4) + hc;
              if (m < m1) store_out<Spec::kOutType>(p.c, (long long)m * p.ldc + n, acc[i][j][2 * hr + hc] + bias);
            }
        }
      }
    }
  };

  // ---- main loop
  if constexpr (Spec::kWgmma) {
    static_assert(kTN == 1 && kStages >= 3 && kBF16, "wgmma shape (shape_error)");
    constexpr int kAhead = kStages - 2;  // activation chunks in flight ahead of the one being computed
    // The packed weight streams through a ring of kDepth slots in shared memory, one slot per iteration (kWK
    // chunks of the CTA's kWN tiles, contiguous per chunk in the prepacked layout: one bulk copy each), refilled
    // kDepth - 1 iterations ahead. Weight in flight costs no registers, and one thread issues the copies.
    constexpr int kTileBytes = 512;  // one 16-row x 64-k tile of packed e2m1
    constexpr int kSlotBytes = kWK * Spec::kWN * kTileBytes;
    static_assert(kSlotBytes * kDepth == wgmma_wring_bytes(Spec::kWN, kWK, kDepth), "kernel.cuh and shape.h");
    const unsigned wring = smem_base + kStages * KS::kStageBytes;
    const int cta_tile0 = blockIdx.x * Spec::kWN;
    // tiles past N are not copied: their slot bytes are stale (any e2m1 code is finite) and never stored
    const unsigned copy_bytes = unsigned(min(Spec::kWN, p.n16 - cta_tile0)) * kTileBytes;
    unsigned af[2][4][4];  // decoded fragments: chunk it uses af[it % 2]
    const unsigned bar0 = kc::smem_u32(&tma_bar[0]), wbar0 = kc::smem_u32(&w_bar[0]);
    auto fetch_a = [&](int chunk) {  // thread 0: iteration chunk's kWK activation boxes (rows m0..) by TMA
      const int st = chunk % kStages;
      kc::mbar_arrive_expect_tx(bar0 + 8 * st, KS::kStageBytes);
#pragma unroll
      for (int w = 0; w < kWK; ++w)  // one 64-wide box per K slice (128-byte swizzle: 64 bf16 per box row)
        kc::tma_load_2d(smem_base + st * KS::kStageBytes + w * kBM * 128, &p.a_tmap[0], (chunk * kWK + w) * 64, m0,
                        bar0 + 8 * st);
    };
    auto fetch_w = [&](int j) {  // thread 0: iteration j's weight chunks (K slots past kc: none) into slot j % kDepth
      const int slot = j % kDepth;
      const int valid = min(kWK, p.kc - j * kWK);
      kc::mbar_arrive_expect_tx(wbar0 + 8 * slot, unsigned(valid) * copy_bytes);
#pragma unroll
      for (int w = 0; w < kWK; ++w)
        if (w < valid)
          kc::bulk_load(wring + slot * kSlotBytes + w * Spec::kWN * kTileBytes,
                        wbase + ((long long)(j * kWK + w) * p.n16 + cta_tile0) * 128, copy_bytes, wbar0 + 8 * slot);
    };
    // Scales: a lane's word of 32-block group g serves chunks 4g .. 4g + 3, so the next group's word is loaded
    // when a group starts (L1-cached: the 4 lanes of a row share it), a whole group ahead of its use.
    const unsigned* __restrict__ slane = sbase + (long long)ntile0 * s_row_words + lane;
    const bool tile_ok = ntile0 < p.n16;
    auto load_s = [&](unsigned& v, int g, bool ok) {
      kc::ld_cached_u32(v, slane + g * 32, ok && tile_ok && g < groups);
    };
    unsigned s_cur = 0x7F7F7F7Fu, s_next = 0x7F7F7F7Fu;  // tiles past N keep 1.0
    int g_cur = 0;                                       // chunk wk < 4 is in group 0
    load_s(s_cur, 0, true);
    load_s(s_next, 1, true);
    if (tid == 0) {
      for (int st = 0; st < kStages; ++st) kc::mbar_init(bar0 + 8 * st, 1);
      for (int sl = 0; sl < kDepth; ++sl) kc::mbar_init(wbar0 + 8 * sl, 1);
    }
    __syncthreads();
    if (tid == 0) {
      for (int st = 0; st < kAhead && st < nit; ++st) fetch_a(st);
      for (int j = 0; j < kDepth && j < nit; ++j) fetch_w(j);
    }
    // this lane's 16 bytes of the weight slot, as a running address: formed from `it % kDepth` instead, ptxas
    // serializes the wgmma of the kWK > 1 configs (C7515)
    const unsigned w_first = wring + (wk * Spec::kWN + wn) * kTileBytes + lane * 16;
    const unsigned w_last = w_first + (kDepth - 1) * kSlotBytes;
    unsigned w_slot = w_first;
    auto k_loop = [&](auto full) {
      for_each_chunk<2>(nit, [&](int it, int d) {
        // a new scale group (c grows by kWK <= 4 per iteration: one group at most). Selects and a predicated
        // load, no branch: a branch join inside the loop makes ptxas serialize the wgmma in flight (C7515).
        const int c = it * kWK + wk;
        const bool new_group = (c >> 2) != g_cur;
        g_cur = c >> 2;
        s_cur = new_group ? s_next : s_cur;
        load_s(s_next, g_cur + 1, new_group);
        kc::mbar_wait(bar0 + 8 * (it % kStages), (it / kStages) & 1);  // chunk it's activations have landed
        kc::mbar_wait(wbar0 + 8 * (it % kDepth), (it / kDepth) & 1);   // ... and its weight
        // every warp is past iteration it - 1: chunk it - 2 is no longer read by any wgmma (its stage may be
        // refilled) and slot (it - 1) % kDepth has been read into registers (it may be refilled)
        __syncthreads();
        if (tid == 0) {
          if (it + kAhead < nit) fetch_a(it + kAhead);
          if (it >= 1 && it - 1 + kDepth < nit) fetch_w(it - 1 + kDepth);
        }
        // a K slot past kc (kWK > 1, last iteration; its slot bytes are stale) adds zeros
        const bool k_ok = kWK == 1 || c < p.kc;
        const uint4 v = kc::ld_shared_v4(w_slot);
        w_slot = w_slot == w_last ? w_first : w_slot + kSlotBytes;
        const uint4 q[1] = {make_uint4(k_ok ? v.x : 0u, k_ok ? v.y : 0u, k_ok ? v.z : 0u, k_ok ? v.w : 0u)};
        const unsigned sw[1] = {k_ok ? s_cur : 0x7F7F7F7Fu};
        compute_wg(it % kStages, it, q, sw, af[d], decltype(full)::value);
        kc::wg_wait<1>();  // chunk it - 1 done: its fragments and stage may be reused
      });
    };
    // Grouped tiles shorter than kBM (an expert's rows are rarely a multiple of it) get a K loop of their own. Each
    // loop ends in a store of its own: with one store after both, ptxas would move the accumulators at the join,
    // and a move between wgmma serializes them. Dense tiles are all full but the last row of them, and warpgroups
    // splitting K (kWK > 1) would spill with two loops in their 128 registers: one loop at N = kBM for both.
    auto run = [&](auto full) {
      k_loop(full);
      kc::wg_wait<0>();
      store_tile();
    };
    if constexpr (!Spec::kGrouped || kWK > 1) run(BoolTag<true>{});
    else if (m1 - m0 == kBM) run(BoolTag<true>{});
    else run(BoolTag<false>{});
  } else if constexpr (kDirect) {
#pragma unroll
    for (int d = 0; d < kDepth; ++d) {
      load_w(d, wq[d], ws[d]);
      load_b(d, bq[d]);
    }
    for_each_chunk<kDepth>(nit, [&](int it, int d) {
      compute(0, it, wq[d], ws[d], bq[d]);
      load_w(it + kDepth, wq[d], ws[d]);
      load_b(it + kDepth, bq[d]);
    });
  } else {
#pragma unroll
    for (int st = 0; st < kStages - 1; ++st) {
      if (st < nit) load_a(st, st);
      kc::cp_async_commit();
    }
#pragma unroll
    for (int d = 0; d < kDepth; ++d) load_w(d, wq[d], ws[d]);

    for_each_chunk<kDepth>(nit, [&](int it, int d) {
      kc::cp_async_wait<kStages - 2>();
      __syncthreads();
      const int nx = it + kStages - 1;
      if (nx < nit) load_a(nx % kStages, nx);
      kc::cp_async_commit();
      compute(it % kStages, it, wq[d], ws[d], bq[0]);
      load_w(it + kDepth, wq[d], ws[d]);
    });
    kc::cp_async_wait<0>();
  }

  if constexpr (!Spec::kWgmma) store_tile();
}

}  // namespace ktune_mxfp4
