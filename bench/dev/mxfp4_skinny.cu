// Time attribution for the few-token mxfp4_gemm path: where does the time of an M <= 16,
// N = K = 8192 call go? Same prepacked layout and decode as templates/mxfp4_gemm (params.h, common/mxfp4.h),
// one kernel with stages switched on one at a time:
//   mode 0  stream   weight + scale loads only (kDepth chunks ahead), folded into one word per lane
//   mode 1  decode   + e2m1 -> bf16 decode of every fragment and the mma (constant activations)
//   mode 2  scale    + the e8m0 scale: quad shuffle, fp32 post-scale per 32-block (the production bm <= 16 path)
//   mode 3  direct   + activation fragments from global memory (L1), like the s0 configs
//   mode 4  smem     + activation fragments from shared memory (the whole K range staged once; bm8 only)
// Outputs are not checked (timing only): random codes and scales, N(0,1)-ish activations.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Itemplates -Ibench/dev -diag-suppress 128 \
//        bench/dev/mxfp4_skinny.cu -o mxfp4_skinny && ./mxfp4_skinny
#include <cuda_runtime.h>

#include "cuda_check.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/global_load.cuh"
#include "common/mma.cuh"
#include "common/mxfp4.h"
#include "mxfp4_dev_params.hpp"
#include "mxfp4_read_floor.cuh"
#include "mxfp4_gemm/kernel.cuh"


namespace kc = ::ktune_common;

struct P {
  const unsigned* w;        // [kc][n16][32][4]
  const unsigned* s;        // [n16][kc/4][32]
  const unsigned short* a;  // [m][k]
  float* out;               // [m][n] (fp32: timing only)
  int m, n16, kc;
};

// mma without `volatile`: the compiler may interleave independent chains (it has no side effects).
KT_DEV void mma_nv(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}
// bf16x2 multiplier 2^(e-1) (both halves) of scale byte i of x: raw e2m1 fragment (code * 2^-126) * 2^(e-1) =
// code * 2^(e-127) in one fma. Exact and normal for 2 <= e <= 128 (checked by the caller).
template <int I>
KT_DEV unsigned fused_mul(unsigned x) {
  const unsigned d = __byte_perm(x, 0u, 0x4040u | (I << 8) | I);  // byte I into bytes 0 and 2
  return d * 128u - 0x00800080u;
}
// every byte of x in [2, 128]
KT_DEV bool scales_fast(unsigned x) {
  const unsigned lo = __byte_perm(x, 0u, 0x4140u), hi = __byte_perm(x, 0u, 0x4342u);  // bytes as 16-bit lanes
  const unsigned a = lo + 0x007E007Eu, b = hi + 0x007E007Eu;  // e + 126: in [128, 254] <=> e in [2, 128]
  return (((a & b) & 0x00800080u) == 0x00800080u) && (((a | b) & 0x01000100u) == 0u) ;
}

// The four m16n8k16 A fragments of one prepacked weight word: e2m1 codes -> bf16 by the library's bit placement and
// one fma per pair (m0 for the row-r0 fragments 0 and 2, m1 for the row-r0+8 fragments 1 and 3).
KT_DEV void decode_word(unsigned word, unsigned m0, unsigned m1, unsigned (&af)[4]) {
  af[0] = kc::bf16x2_fma(kc::e2m1x2_raw<0, true>(word), m0, 0x80008000u);
  af[1] = kc::bf16x2_fma(kc::e2m1x2_raw<1, true>(word), m1, 0x80008000u);
  af[2] = kc::bf16x2_fma(kc::e2m1x2_raw<2, true>(word), m0, 0x80008000u);
  af[3] = kc::bf16x2_fma(kc::e2m1x2_raw<3, true>(word), m1, 0x80008000u);
}
// acc += tmp x the e8m0 scales of 32-block sp / 2 (the library's few-token fp32 post-scale).
template <int TN, int MT>
KT_DEV void post_scale(const unsigned (&sc)[TN], int sp, const float (&tmp)[TN][MT][4], float (&acc)[TN][MT][4]) {
#pragma unroll
  for (int i = 0; i < TN; ++i) {
    const unsigned kb = (sc[i] >> (16 * (sp >> 1))) & 0xFFFFu;
    const float f0 = kc::e8m0_to_f32(kb & 0xFFu), f1 = kc::e8m0_to_f32(kb >> 8);
#pragma unroll
    for (int j = 0; j < MT; ++j) {
      acc[i][j][0] = fmaf(tmp[i][j][0], f0, acc[i][j][0]);
      acc[i][j][1] = fmaf(tmp[i][j][1], f0, acc[i][j][1]);
      acc[i][j][2] = fmaf(tmp[i][j][2], f1, acc[i][j][2]);
      acc[i][j][3] = fmaf(tmp[i][j][3], f1, acc[i][j][3]);
    }
  }
}

template <int MODE, int MT, int TN, int WK, int D>
__global__ void __launch_bounds__(32 * WK, 1) skinny(const P p) {
  extern __shared__ __align__(16) unsigned char smem[];
  const int lane = threadIdx.x % 32, wk = threadIdx.x / 32;
  const int nt0 = blockIdx.x * TN;
  const int groups = p.kc / 4;
  const int nit = p.kc / WK;
  if constexpr (MODE == 4) {  // stage A [8][k] once, rows 128-byte swizzled per 64-k chunk
    const int chunks = 8 * p.kc * 8;
    for (int i = threadIdx.x; i < chunks; i += 32 * WK) {
      const int r = i / (p.kc * 8), ch = i % (p.kc * 8);
      const uint4 v = r < p.m ? *reinterpret_cast<const uint4*>(p.a + (long long)r * p.kc * 64 + ch * 8) : make_uint4(0, 0, 0, 0);
      *reinterpret_cast<uint4*>(smem + r * p.kc * 128 + ((ch & ~7) | ((ch & 7) ^ r)) * 16) = v;
    }
    __syncthreads();
  }
  uint4 wq[D][TN];
  unsigned ws[D][TN];
  unsigned bq[MODE == 3 || MODE >= 5 ? D : 1][MT][8];
  auto load = [&](int it, int d) {
    const int c = it * WK + wk;
    const bool ok = it < nit;
#pragma unroll
    for (int i = 0; i < TN; ++i) {
      wq[d][i] = make_uint4(0, 0, 0, 0);
      ws[d][i] = 0x7F7F7F7Fu;
      kc::ld_stream_v4(wq[d][i], p.w + ((long long)c * p.n16 + nt0 + i) * 128 + lane * 4, ok);
      kc::ld_cached_u32(ws[d][i], p.s + ((long long)(nt0 + i) * groups + (c >> 2)) * 32 + lane, ok);
    }
    if constexpr (MODE == 3 || MODE >= 5) {
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        const int row = 8 * j + lane / 4;
        const unsigned short* src = p.a + (long long)row * p.kc * 64 + c * 64 + 2 * (lane % 4);
#pragma unroll
        for (int s = 0; s < 4; ++s) {
          bq[d][j][2 * s] = bq[d][j][2 * s + 1] = 0;
          kc::ld_cached_u32(bq[d][j][2 * s], src + 16 * s, ok && row < p.m);
          kc::ld_cached_u32(bq[d][j][2 * s + 1], src + 16 * s + 8, ok && row < p.m);
        }
      }
    }
  };
  float acc[TN][MT][4] = {};
  unsigned fold = 0;
#pragma unroll
  for (int d = 0; d < D; ++d) load(d, d);
  for (int base = 0; base < nit; base += D) {
#pragma unroll
    for (int d = 0; d < D; ++d) {
      const int it = base + d;
      if (it >= nit) break;
      const int c = it * WK + wk;
      if constexpr (MODE == 0) {
#pragma unroll
        for (int i = 0; i < TN; ++i) fold ^= wq[d][i].x ^ wq[d][i].y ^ wq[d][i].z ^ wq[d][i].w ^ ws[d][i];
      } else {
        unsigned sc[TN];
        if constexpr (MODE >= 2) {
#pragma unroll
          for (int i = 0; i < TN; ++i) sc[i] = __shfl_sync(0xffffffffu, ws[d][i], (lane & ~3) | (c & 3));
          if constexpr (MODE >= 5) {
            bool fast = true;
#pragma unroll
            for (int i = 0; i < TN; ++i) fast &= scales_fast(sc[i]);
            if (!__all_sync(0xffffffffu, fast)) fold ^= 1;  // (timing harness: the exact slow path is not built)
          }
        } else {
#pragma unroll
          for (int i = 0; i < TN; ++i) fold ^= ws[d][i];
        }
#pragma unroll
        for (int sp = 0; sp < 4; sp += 2) {
          unsigned b[MT][4];
#pragma unroll
          for (int j = 0; j < MT; ++j) {
            if constexpr (MODE == 3 || MODE >= 5) {
#pragma unroll
              for (int x = 0; x < 4; ++x) b[j][x] = bq[d][j][2 * sp + x];
            } else if constexpr (MODE == 4) {
              const int r = 8 * j + (lane & 7), ch = c * 8 + 2 * sp + (lane >> 3);
              kc::ldmatrix_x4(b[j], kc::smem_u32(smem) + r * p.kc * 128 + ((ch & ~7) | ((ch & 7) ^ r)) * 16);
            } else {
              b[j][0] = 0x3F803F80u; b[j][1] = 0x3F803F80u; b[j][2] = 0x3F803F80u; b[j][3] = 0x3F803F80u;
            }
          }
          if constexpr (MODE >= 5) {  // lean: scale fused into the decode fma, accumulate in acc
            const int bsel = sp >> 1;  // 32-block of this k16 pair
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int s = sp + h;
#pragma unroll
              for (int i = 0; i < TN; ++i) {
                const unsigned word = s == 0 ? wq[d][i].x : s == 1 ? wq[d][i].y : s == 2 ? wq[d][i].z : wq[d][i].w;
                const unsigned m0 = bsel == 0 ? fused_mul<0>(sc[i]) : fused_mul<2>(sc[i]);
                const unsigned m1 = bsel == 0 ? fused_mul<1>(sc[i]) : fused_mul<3>(sc[i]);
                unsigned af[4];
                decode_word(word, m0, m1, af);
#pragma unroll
                for (int j = 0; j < MT; ++j) {
                  if constexpr (MODE == 6) mma_nv(acc[i][j], af, b[j][2 * h], b[j][2 * h + 1]);
                  else kc::mma_16816<true>(acc[i][j], af, b[j][2 * h], b[j][2 * h + 1]);
                }
              }
            }
            continue;
          }
          float tmp[TN][MT][4] = {};
#pragma unroll
          for (int h = 0; h < 2; ++h) {
            const int s = sp + h;
#pragma unroll
            for (int i = 0; i < TN; ++i) {
              const unsigned word = s == 0 ? wq[d][i].x : s == 1 ? wq[d][i].y : s == 2 ? wq[d][i].z : wq[d][i].w;
              unsigned af[4];
              decode_word(word, 0x7E807E80u, 0x7E807E80u, af);
#pragma unroll
              for (int j = 0; j < MT; ++j) kc::mma_16816<true>(MODE >= 2 ? tmp[i][j] : acc[i][j], af, b[j][2 * h], b[j][2 * h + 1]);
            }
          }
          if constexpr (MODE >= 2) post_scale(sc, sp, tmp, acc);
        }
      }
      load(it + D, d);
    }
  }
  float v = __uint_as_float(fold & 0x3FFFFFFFu);
#pragma unroll
  for (int i = 0; i < TN; ++i)
#pragma unroll
    for (int j = 0; j < MT; ++j) v += acc[i][j][0] + acc[i][j][1] + acc[i][j][2] + acc[i][j][3];
  p.out[(blockIdx.x * WK + wk) * 32 + lane] = v;  // one value per lane: keeps everything live
}

using mxfp4_dev::read_all;  // the floor for these bytes (mxfp4_read_floor.cuh)

// `mxfp4_skinny ncu`: one launch per variant (for Nsight Compute), no timing.
bool g_profile_once = false;

// Per-call time (events around each launch) and back-to-back time (20 launches between one event pair).
template <class Launch>
void time_it(Launch&& launch, int copies, double* per_call_us, double* b2b_us) {
  if (g_profile_once) {
    launch(0);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    *per_call_us = *b2b_us = 0;
    return;
  }
  const int reps = 40, batch = 20;
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < 5; ++i) launch(i % copies);
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(ev[2 * i]));
    launch(i % copies);
    CK(cudaEventRecord(ev[2 * i + 1]));
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  std::sort(t.begin(), t.end());
  *per_call_us = t[reps / 2] * 1e3;
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(ev[2 * i]));
    for (int j = 0; j < batch; ++j) launch((i + j) % copies);
    CK(cudaEventRecord(ev[2 * i + 1]));
  }
  CK(cudaDeviceSynchronize());
  for (int i = 0; i < reps; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  std::sort(t.begin(), t.end());
  *b2b_us = t[reps / 2] * 1e3 / batch;
  for (auto& e : ev) CK(cudaEventDestroy(e));
}

struct Bufs {
  std::vector<unsigned*> w, s;
  unsigned short* a;
  float* out;
};

template <int MODE, int MT, int TN, int WK, int D>
void run(const Bufs& b, int m, int n, int k, const char* tag) {
  P p{};
  p.m = m;
  p.n16 = n / 16;
  p.kc = k / 64;
  p.a = b.a;
  p.out = b.out;
  const int grid = p.n16 / TN;
  const int smem = MODE == 4 ? 8 * p.kc * 128 : 0;
  auto kern = skinny<MODE, MT, TN, WK, D>;
  if (MODE == 4 && (MT != 1 || smem > 227 * 1024)) return;
  const cudaFuncAttributes fa = allow_smem(kern, smem);
  double us = 0, b2b = 0;
  time_it([&](int r) {
    p.w = b.w[r];
    p.s = b.s[r];
    kern<<<grid, 32 * WK, smem>>>(p);
  }, int(b.w.size()), &us, &b2b);
  const double bytes = double(n) * k / 2 + double(n) * k / 32 + 2.0 * m * k + 2.0 * m * n;
  std::printf("%-7s m%-3d tn%d wk%-2d d%d  %7.2f us  %5.2f TB/s  | back-to-back %7.2f us  %5.2f TB/s | regs %3d  local %d B\n",
              tag, m, TN, WK, D, us, bytes / us / 1e6, b2b, bytes / b2b / 1e6, fa.numRegs, int(fa.localSizeBytes));
}


// ---- mode 7: warp-specialized, bulk-copy (TMA) ring ------------------------------------------------------
// One producer warp streams each stage (SK = CW chunks of 64 k x NT weight tiles, their scales, and the
// activation rows of that k range) into a shared-memory ring with cp.async.bulk, completion on an mbarrier;
// CW consumer warps each take one chunk of the stage for every tile (decode + mma from shared memory) and
// free the slot. No weight bytes live in registers, so occupancy is not traded for bytes in flight.
KT_DEV void mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
KT_DEV void mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
KT_DEV void mbar_arrive(unsigned bar) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory"); }
KT_DEV void mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{ .reg .pred done;\n"
      "WAIT_%=: mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
      "@!done bra WAIT_%=; }" ::"r"(bar), "r"(parity) : "memory");
}
KT_DEV void bulk_g2s(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               ::"r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

template <int MT, int NT, int CW>
struct TmaShape {
  static constexpr int SK = CW;                       // chunks per stage
  static constexpr int kW = SK * NT * 512;            // weight bytes per stage
  static constexpr int kS = (SK / 4) * NT * 128;      // scale bytes per stage
  static constexpr int kArow = SK * 128 + 16;         // padded activation row (ldmatrix conflict-free)
  static constexpr int kA = 8 * MT * kArow;
  static constexpr int kStage = kW + kS + kA;
};

template <int MT, int NT, int CW, int R>
__global__ void __launch_bounds__(32 * (CW + 1), 1) tma_skinny(const P p, int k) {
  using T = TmaShape<MT, NT, CW>;
  constexpr int SK = T::SK;
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sb = kc::smem_u32(smem);
  const unsigned bars = sb + R * T::kStage;  // full[R], empty[R]
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int nt0 = blockIdx.x * NT, m0 = blockIdx.y * 8 * MT;
  const int rows = min(8 * MT, p.m - m0);
  const int ntiles = min(NT, p.n16 - nt0);
  const int groups = (p.kc + 3) / 4;
  const int stages = (p.kc + SK - 1) / SK;
  if (threadIdx.x == 0) {
    for (int i = 0; i < R; ++i) {
      mbar_init(bars + 8 * i, 1);
      mbar_init(bars + 8 * (R + i), CW);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  if (warp == CW) {  // producer
    if (lane == 0) {
      for (int st = 0; st < stages; ++st) {
        const int slot = st % R;
        if (st >= R) mbar_wait(bars + 8 * (R + slot), ((st / R) - 1) & 1);
        const int c0 = st * SK, nch = min(SK, p.kc - c0);
        const int g0 = c0 / 4, ng = min(SK / 4, groups - g0);
        const int k0 = c0 * 64, kb = min(k, (c0 + SK) * 64) - k0;  // activation k range
        const unsigned bytes = nch * ntiles * 512 + ntiles * ng * 128 + rows * kb * 2;
        const unsigned full = bars + 8 * slot, base = sb + slot * T::kStage;
        mbar_expect_tx(full, bytes);
        for (int ci = 0; ci < nch; ++ci)
          bulk_g2s(base + ci * NT * 512, p.w + ((long long)(c0 + ci) * p.n16 + nt0) * 128, ntiles * 512, full);
        for (int i = 0; i < ntiles; ++i)
          bulk_g2s(base + T::kW + i * (SK / 4) * 128, p.s + ((long long)(nt0 + i) * groups + g0) * 32, ng * 128, full);
        for (int r = 0; r < rows; ++r)
          bulk_g2s(base + T::kW + T::kS + r * T::kArow, p.a + (long long)(m0 + r) * k + k0, kb * 2, full);
      }
    }
    return;
  }
  float acc[NT][MT][4] = {};
  for (int st = 0; st < stages; ++st) {
    const int slot = st % R;
    mbar_wait(bars + 8 * slot, (st / R) & 1);
    const int c = st * SK + warp;
    if (c < p.kc) {
      const unsigned base = sb + slot * T::kStage;
      const bool half = c * 64 + 32 >= k;  // the last chunk holds only 32 k: steps 2, 3 are padding
      uint4 q[NT];
      unsigned sc[NT];
#pragma unroll
      for (int i = 0; i < NT; ++i) {
        asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(q[i].x), "=r"(q[i].y), "=r"(q[i].z), "=r"(q[i].w)
                     : "r"(base + (warp * NT + i) * 512 + lane * 16));
        asm volatile("ld.shared.u32 %0, [%1];" : "=r"(sc[i])
                     : "r"(base + T::kW + ((i * (SK / 4) + warp / 4) * 32 + ((lane & ~3) | (c & 3))) * 4));
      }
#pragma unroll
      for (int sp = 0; sp < 4; sp += 2) {
        unsigned b[MT][4];
#pragma unroll
        for (int j = 0; j < MT; ++j) {
          const int r = 8 * j + (lane & 7), ch = warp * 8 + 2 * sp + (lane >> 3);
          kc::ldmatrix_x4(b[j], base + T::kW + T::kS + r * T::kArow + ch * 16);
          if (sp == 2 && half) b[j][0] = b[j][1] = b[j][2] = b[j][3] = 0u;
        }
        float tmp[NT][MT][4] = {};
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int s = sp + h;
#pragma unroll
          for (int i = 0; i < NT; ++i) {
            const unsigned word = s == 0 ? q[i].x : s == 1 ? q[i].y : s == 2 ? q[i].z : q[i].w;
            unsigned af[4];
            decode_word(word, 0x7E807E80u, 0x7E807E80u, af);
#pragma unroll
            for (int j = 0; j < MT; ++j) mma_nv(tmp[i][j], af, b[j][2 * h], b[j][2 * h + 1]);
          }
        }
        post_scale(sc, sp, tmp, acc);
      }
    }
    __syncwarp();
    if (lane == 0) mbar_arrive(bars + 8 * (R + slot));
  }
  // fixed-order reduction over the consumer warps (the ring is free: every stage was consumed)
  asm volatile("bar.sync 1, %0;" ::"r"(32 * CW) : "memory");
  float* red = reinterpret_cast<float*>(smem);
  constexpr int kPer = NT * MT * 4;
#pragma unroll
  for (int i = 0; i < NT; ++i)
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) red[((warp * kPer) + (i * MT + j) * 4 + r) * 32 + lane] = acc[i][j][r];
  asm volatile("bar.sync 1, %0;" ::"r"(32 * CW) : "memory");
  for (int o = threadIdx.x; o < kPer * 32; o += 32 * CW) {
    float v = 0.f;
    for (int w = 0; w < CW; ++w) v += red[w * kPer * 32 + o];
    const int e = o / 32, ln = o % 32, i = e / (MT * 4), j = (e / 4) % MT, r = e % 4;
    const int n = (nt0 + i) * 16 + ln / 4 + 8 * (r / 2), m = m0 + 8 * j + 2 * (ln % 4) + (r % 2);
    if (i < ntiles && m < p.m) p.out[(long long)m * p.n16 * 16 + n] = v;
  }
}

// Exact reference (fp32, one thread per output) straight from the prepacked layout (templates/mxfp4_gemm/params.h).
__global__ void reference(const P p, int k) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x, m = blockIdx.y;
  if (n >= p.n16 * 16) return;
  const int nt = n / 16, r = n % 16, groups = (p.kc + 3) / 4;
  float acc = 0.f;
  for (int kk = 0; kk < k; ++kk) {
    const int c = kk / 64, s = (kk % 64) / 16, kq = kk % 16;
    const int l = (r % 8) * 4 + (kq % 8) / 2, j = (r / 8) + 2 * (kq / 8);
    const unsigned word = p.w[((long long)(c * p.n16 + nt) * 32 + l) * 4 + s];
    const unsigned code = (word >> (4 * j + 16 * (kq % 2))) & 0xFu;
    const float mags[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
    const float v = (code & 8 ? -1.f : 1.f) * mags[code & 7];
    const int blk = kk / 32, cb = blk / 2;
    const unsigned sw = p.s[((long long)nt * groups + cb / 4) * 32 + (r % 8) * 4 + cb % 4];
    const unsigned e = (sw >> (8 * ((r / 8) + 2 * (blk % 2)))) & 0xFFu;
    const float a = kc::bf16_to_float(p.a[(long long)m * k + kk]);
    acc += a * v * kc::e8m0_to_f32(e);
  }
  p.out[(long long)m * p.n16 * 16 + n] = acc;
}

template <int MT, int NT, int CW, int R>
void run_tma(const Bufs& b, int m, int n, int k, float* ref) {
  using T = TmaShape<MT, NT, CW>;
  P p{};
  p.m = m;
  p.n16 = n / 16;
  p.kc = k / 64;
  p.a = b.a;
  p.out = b.out;
  const int smem = R * T::kStage + 16 * R;
  auto kern = tma_skinny<MT, NT, CW, R>;
  const cudaFuncAttributes fa = allow_smem(kern, smem);
  const dim3 grid(p.n16 / NT, (m + 8 * MT - 1) / (8 * MT));
  // correctness on copy 0 against the exact reference
  p.w = b.w[0];
  p.s = b.s[0];
  CK(cudaMemset(b.out, 0xFF, size_t(m) * n * 4));
  kern<<<grid, 32 * (CW + 1), smem>>>(p, k);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> got(size_t(m) * n), want(size_t(m) * n);
  CK(cudaMemcpy(got.data(), b.out, got.size() * 4, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(want.data(), ref, want.size() * 4, cudaMemcpyDeviceToHost));
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num += (double(got[i]) - want[i]) * (double(got[i]) - want[i]);
    den += double(want[i]) * want[i];
  }
  double us = 0, b2b = 0;
  time_it([&](int r) {
    p.w = b.w[r];
    p.s = b.s[r];
    kern<<<grid, 32 * (CW + 1), smem>>>(p, k);
  }, int(b.w.size()), &us, &b2b);
  const double bytes = double(n) * k / 2 + double(n) * k / 32 + 2.0 * m * k + 2.0 * m * n;
  std::printf("tma     m%-3d nt%d cw%d r%d  %7.2f us  %5.2f TB/s  | back-to-back %7.2f us  %5.2f TB/s | regs %3d smem %6d  relL2 %.2e\n",
              m, NT, CW, R, us, bytes / us / 1e6, b2b, bytes / b2b / 1e6, fa.numRegs, smem, std::sqrt(num / den));
}


// ---- the library kernel (templates/mxfp4_gemm/kernel.cuh), built by nvcc here, on the same buffers ----------
namespace lib {
template <int kBMv, int kTNv, int kWKv, int kStagesv, int kDepthv>
struct Spec {
  static constexpr bool kNative = false, kTcgen05 = false;
  static constexpr int kAType = ::ktune_common::kBF16, kOutType = ::ktune_common::kBF16;
  static constexpr bool kGrouped = false;
  static constexpr int kBM = kBMv, kTN = kTNv, kWN = 1, kWK = kWKv, kStages = kStagesv, kDepth = kDepthv;
  static constexpr bool kWgmma = false;
};
}  // namespace lib

template <int BM, int TN, int WK, int ST, int D>
void run_lib(const Bufs& b, int m, int n, int k, const char* tag) {
  using S = lib::Spec<BM, TN, WK, ST, D>;
  constexpr ktune_mxfp4::Shape sh = ktune_mxfp4::K<S>::kS;
  auto kern = ktune_mxfp4::gemm_kernel<S>;
  const cudaFuncAttributes fa = allow_smem(kern, sh.smem_total);
  ktune_mxfp4::Params p = dense_dev_params(b.a, b.out, m, n, k);  // bf16 out into the float buffer (timing only)
  const dim3 grid((p.n16 + TN - 1) / TN, (m + BM - 1) / BM);
  double us = 0, b2b = 0;
  time_it([&](int r) {
    p.w = b.w[r];
    p.s = b.s[r];
    kern<<<grid, sh.threads, sh.smem_total>>>(p);
  }, int(b.w.size()), &us, &b2b);
  const double bytes = double(n) * k / 2 + double(n) * k / 32 + 2.0 * m * k + 2.0 * m * n;
  std::printf("%-7s m%-3d bm%d tn%d wk%d s%d d%d %7.2f us  %5.2f TB/s  | back-to-back %7.2f us  %5.2f TB/s"
              " | regs %3d  local %d B\n",
              tag, m, BM, TN, WK, ST, D, us, bytes / us / 1e6, b2b, bytes / b2b / 1e6, fa.numRegs,
              int(fa.localSizeBytes));
}

template <int MT, int TN, int WK, int D>
void modes(const Bufs& b, int m, int n, int k) {
  run<0, MT, TN, WK, D>(b, m, n, k, "stream");
  run<1, MT, TN, WK, D>(b, m, n, k, "decode");
  run<2, MT, TN, WK, D>(b, m, n, k, "scale");
  run<3, MT, TN, WK, D>(b, m, n, k, "direct");
  run<4, MT, TN, WK, D>(b, m, n, k, "smem");
  run<5, MT, TN, WK, D>(b, m, n, k, "lean");
  run<6, MT, TN, WK, D>(b, m, n, k, "lean-nv");
}

int main(int argc, char** argv) {
  const int n = 8192, k = 8192, copies = 4;
  const bool ncu = argc > 1 && std::string(argv[1]) == "ncu";
  Bufs b;
  const size_t wb = size_t(n) * k / 2, sb = size_t(n) * k / 32;
  std::vector<unsigned char> hw(wb), hs(sb);
  unsigned x = 12345;
  for (auto& v : hw) v = (x = x * 1664525u + 1013904223u) >> 24;
  for (auto& v : hs) v = 120 + ((x = x * 1664525u + 1013904223u) >> 29);
  for (int c = 0; c < copies; ++c) {
    unsigned *w, *s;
    CK(cudaMalloc(&w, wb));
    CK(cudaMalloc(&s, sb));
    CK(cudaMemcpy(w, hw.data(), wb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(s, hs.data(), sb, cudaMemcpyHostToDevice));
    b.w.push_back(w);
    b.s.push_back(s);
  }
  std::vector<unsigned short> ha(size_t(16) * k);
  for (auto& v : ha) v = 0x3F00 | ((x = x * 1664525u + 1013904223u) >> 25) | (x & 0x8000u);
  CK(cudaMalloc(&b.a, ha.size() * 2));
  CK(cudaMemcpy(b.a, ha.data(), ha.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMalloc(&b.out, size_t(1) << 24));
  if (ncu) {  // the M = 1 default, an M = 16 tiling, and the pure read
    g_profile_once = true;
    run_lib<8, 4, 16, 0, 2>(b, 1, n, k, "library");
    run_lib<16, 4, 8, 3, 2>(b, 16, n, k, "library");
    read_all<<<528, 512>>>(reinterpret_cast<const uint4*>(b.w[0]), (long long)(wb / 16),
                           reinterpret_cast<const uint4*>(b.s[0]), (long long)(sb / 16),
                           reinterpret_cast<unsigned*>(b.out));
    CK(cudaDeviceSynchronize());
    return 0;
  }
  // copy ceiling for the same bytes
  {
    void *src, *dst;
    CK(cudaMalloc(&src, size_t(1) << 31));
    CK(cudaMalloc(&dst, size_t(1) << 31));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaMemcpy(dst, src, size_t(1) << 31, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e0));
    for (int i = 0; i < 5; ++i) CK(cudaMemcpy(dst, src, size_t(1) << 31, cudaMemcpyDeviceToDevice));
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    std::printf("copy 2 GiB: %.2f TB/s (read + write)\n", 5 * 2.0 * (size_t(1) << 31) / (ms * 1e-3) / 1e12);
    CK(cudaFree(src));
    CK(cudaFree(dst));
  }
  for (int blocks : {132, 264, 528, 1056}) {
    double us = 0, b2b = 0;
    time_it([&](int r) {
      read_all<<<blocks, 512>>>(reinterpret_cast<const uint4*>(b.w[r]), (long long)(wb / 16),
                                reinterpret_cast<const uint4*>(b.s[r]), (long long)(sb / 16), reinterpret_cast<unsigned*>(b.out));
    }, copies, &us, &b2b);
    const double bytes = double(wb + sb);
    std::printf("read_all %4d x 512      %7.2f us  %5.2f TB/s  | back-to-back %7.2f us  %5.2f TB/s\n", blocks, us,
                bytes / us / 1e6, b2b, bytes / b2b / 1e6);
  }
  // The library's few-token tiles: the M = 1 / 8 / 16 defaults and the tn2.wk8 form, each twice.
  for (int rep = 0; rep < 2; ++rep) {
    run_lib<8, 4, 16, 0, 2>(b, 1, n, k, "library");
    run_lib<8, 4, 16, 0, 2>(b, 8, n, k, "library");
    run_lib<8, 2, 8, 0, 2>(b, 1, n, k, "library");
    run_lib<16, 4, 8, 3, 2>(b, 16, n, k, "library");
  }
  return 0;
}
