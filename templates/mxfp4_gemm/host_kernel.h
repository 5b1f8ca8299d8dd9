// mxfp4_gemm for the host CPU: C = A W^T (+ bias) with W in the GPU's prepacked MXFP4 layout (params.h,
// prepack.cpp), so one prepacked weight and one argument struct serve both targets. Portable C++17 without
// system headers: the LLVM host backend JIT-compiles it from the embedded templates like NVRTC compiles
// kernel.cuh. e2m1 / e8m0 decoding is the one definition in common/mxfp4.h; 16-bit conversions are
// common/numerics.cuh's.
//
// Work item = (row slab of one expert, N tile of 16 * kTN output columns). Per K step of 64 * kKT columns the
// item decodes its weight tiles to fp32 once, transposed to [k][n] (wd), scale folded in (exact: a power of two
// times an e2m1 value; a NaN scale makes that block's weights NaN, so the output column is NaN for every row
// that uses it, as on the GPU), then runs a register-blocked outer product over the slab's rows, kBM rows at a
// time: kBM x 16 kTN fp32 accumulators, one broadcast activation times one decoded weight row per k. The
// n dimension is the vectorized one (16 kTN lanes), so no horizontal reductions are needed. Products are exact
// in fp32 (a 16-bit value times a scaled e2m1); sums are fp32; bias is added in fp32; one rounding at the store.
//
// The spec S gives the tunables and dtypes as constants (S::kAType, kOutType, kBM, kTN, kKT) and the shape
// through an object `sp` (sp.kN, sp.kK): compile-time constants in a JIT specialization (every trip count and
// tail known to the optimizer), run-time members in the ahead-of-time build of bench/bench_host_mxfp4.cpp.
#pragma once

#include "common/dtype.h"
#include "common/mxfp4.h"
#include "common/numerics.cuh"
#include "mxfp4_gemm/host_params.h"

namespace ktune_mxfp4 {
namespace host {

namespace kc = ::ktune_common;

constexpr int kSlabRows = 64;  // = mxfp4::host_slab_rows(): rows of one item (launcher cuts slabs this size)

template <class S>
struct Kernel {
  static constexpr int BM = S::kBM, TN = S::kTN, KT = S::kKT;
  static constexpr int NT = 16 * TN;    // output columns per item (vector lanes)
  static constexpr int KS = 64 * KT;    // K columns per step
  static_assert(BM >= 1 && BM <= 8 && TN >= 1 && TN <= 4 && KT >= 1 && KT <= 16, "host tunables out of range");

  template <int T>
  static inline float load16(const void* base, long long i) {
    const unsigned short h = static_cast<const unsigned short*>(base)[i];
    if constexpr (T == kc::kBF16) return kc::bf16_to_float(h);
    else return kc::fp16_to_float(h);
  }

  // Chunk c (64 K columns) of 16-row weight tile nt into wd[kk][col0 + r] (kk = 0..63 relative to dst).
  // Inverse of prepack.cpp's place(): lane l, word s, nibble j hold row l/4 + 8 (j & 1), column
  // 16 s + 8 ((j >> 1) & 1) + 2 (l % 4) + (j >> 2); the scales of chunk c sit in lane (r % 8) * 4 + c % 4 of
  // scale group c / 4, byte (r / 8) + 2 * block. Loop order: for one word index s and column pair q = l % 4, the
  // 8 words of lanes r * 4 + q hold all 16 rows of 4 columns, so each output row wd[kk][col0 .. col0 + 16) is
  // one 16-lane pass (shift, mask, table, scale, contiguous store) that the compiler vectorizes.
  static inline void decode_chunk(const unsigned* w, const unsigned* s, int n16, int groups, int c, int nt, int col0,
                                  const float* e2m1, float (*wd)[NT]) {
    const unsigned* chunk = w + ((long long)c * n16 + nt) * 128;
    const unsigned* sg = s + ((long long)nt * groups + c / 4) * 32;
    alignas(64) float sc[2][16];  // [block][row]
    for (int r = 0; r < 16; ++r) {
      const unsigned word = sg[(r % 8) * 4 + c % 4];
      for (int h = 0; h < 2; ++h)
        sc[h][r] = kc::e8m0_to_float(static_cast<unsigned char>(word >> (8 * ((r / 8) + 2 * h))));
    }
    for (int word = 0; word < 4; ++word) {
      const float* scw = sc[word >> 1];
      for (int q = 0; q < 4; ++q) {
        unsigned wv[8];
        for (int r8 = 0; r8 < 8; ++r8) wv[r8] = chunk[(r8 * 4 + q) * 4 + word];
        for (int ab = 0; ab < 4; ++ab) {  // a = ab & 1 (+8 columns), b = ab >> 1 (odd column)
          const int a = ab & 1, b = ab >> 1;
          float* dst = wd[16 * word + 8 * a + 2 * q + b] + col0;
          for (int r = 0; r < 16; ++r) {
            const unsigned code = (wv[r % 8] >> (4 * ((r / 8) + 2 * a + 4 * b))) & 15u;
            dst[r] = e2m1[code] * scw[r];
          }
        }
      }
    }
  }

  // acc[i][*] += A[row0 + i][k0 .. k0 + klen) . wd[0 .. klen) for B rows: B x NT / 16 vector accumulators held in
  // registers (GCC/Clang vector extension: 16 fp32 lanes, one AVX-512 or two AVX2 registers) for the whole step.
  typedef float V16 __attribute__((vector_size(64), aligned(64)));
  static constexpr int NV = NT / 16;
  template <int B>
  static inline void block(const Params& p, int row0, int k0, int klen, const float (*wd)[NT], float (*acc)[NT]) {
    alignas(64) float ab[B][KS];
    for (int i = 0; i < B; ++i) {
      const long long base = (long long)(row0 + i) * p.lda + k0;
      for (int k = 0; k < klen; ++k) ab[i][k] = load16<S::kAType>(p.a, base + k);
    }
    V16 r[B][NV];
    for (int i = 0; i < B; ++i)
      for (int v = 0; v < NV; ++v) r[i][v] = *reinterpret_cast<const V16*>(acc[i] + 16 * v);
    for (int k = 0; k < klen; ++k) {
      const V16* wk = reinterpret_cast<const V16*>(wd[k]);
      for (int i = 0; i < B; ++i) {
        const float av = ab[i][k];
        for (int v = 0; v < NV; ++v) r[i][v] += av * wk[v];
      }
    }
    for (int i = 0; i < B; ++i)
      for (int v = 0; v < NV; ++v) *reinterpret_cast<V16*>(acc[i] + 16 * v) = r[i][v];
  }

  // One K step [k0, k0 + klen) of an item: decode, then every row of the slab.
  static inline void step(const S& sp, const Params& p, const unsigned* w, const unsigned* s, int nt0, int tiles,
                          int row0, int rows, int k0, int klen, const float* e2m1, float (*wd)[NT],
                          float (*acc)[NT]) {
    const int n16 = (sp.kN + 15) / 16, kcn = (sp.kK + 63) / 64, groups = (kcn + 3) / 4;
    const int c0 = k0 / 64, chunks = (klen + 63) / 64;
    for (int t = 0; t < TN; ++t) {
      if (t < tiles) {
        for (int cc = 0; cc < chunks; ++cc) decode_chunk(w, s, n16, groups, c0 + cc, nt0 + t, 16 * t, e2m1, wd + 64 * cc);
      } else {  // past the last 16-row tile of W: nothing to read, zero weights (never stored)
        for (int k = 0; k < 64 * chunks; ++k)
          for (int r = 0; r < 16; ++r) wd[k][16 * t + r] = 0.f;
      }
    }
    int i = 0;
    for (; i + BM <= rows; i += BM) block<BM>(p, row0 + i, k0, klen, wd, acc + i);
    for (; i < rows; ++i) block<1>(p, row0 + i, k0, klen, wd, acc + i);
  }

  static void item(const S& sp, const HostWork& hw, int it) {
    const Params& p = hw.p;
    const int N = sp.kN, K = sp.kK;
    const int n16 = (N + 15) / 16, kcn = (K + 63) / 64, groups = (kcn + 3) / 4;
    const int slab = it / hw.n_tiles, tile = it % hw.n_tiles;
    const int expert = hw.slabs[3 * slab], row0 = hw.slabs[3 * slab + 1], rows = hw.slabs[3 * slab + 2] - row0;
    if (rows <= 0) return;
    const int nt0 = tile * TN;
    const int tiles = n16 - nt0 < TN ? n16 - nt0 : TN;
    const unsigned* w = p.w + (long long)expert * n16 * kcn * 128;
    const unsigned* s = p.s + (long long)expert * n16 * groups * 32;

    float e2m1[16];
    for (unsigned c = 0; c < 16; ++c) e2m1[c] = kc::e2m1_to_float(c);
    alignas(64) float wd[KS][NT];
    alignas(64) float acc[kSlabRows][NT];
    for (int i = 0; i < rows; ++i)
      for (int j = 0; j < NT; ++j) acc[i][j] = 0.f;

    int k0 = 0;
    for (; k0 + KS <= K; k0 += KS) step(sp, p, w, s, nt0, tiles, row0, rows, k0, KS, e2m1, wd, acc);
    if (k0 < K) step(sp, p, w, s, nt0, tiles, row0, rows, k0, K - k0, e2m1, wd, acc);  // K tail (a multiple of 32)

    const int col0 = nt0 * 16;
    const int ncols = N - col0 < NT ? N - col0 : NT;
    for (int i = 0; i < rows; ++i) {
      unsigned short* out = static_cast<unsigned short*>(p.c) + (long long)(row0 + i) * p.ldc + col0;
      for (int j = 0; j < ncols; ++j) {
        float v = acc[i][j];
        if (p.bias) v += load16<S::kOutType>(p.bias, (long long)expert * N + col0 + j);
        out[j] = S::kOutType == kc::kBF16 ? kc::float_to_bf16(v) : kc::float_to_fp16(v);
      }
    }
  }

  static void run(const S& sp, const HostWork& hw, int begin, int end) {
    for (int it = begin; it < end; ++it) item(sp, hw, it);
  }
};

}  // namespace host

// Entry point of a generated host specialization (S: every member a compile-time constant). Signature:
// void(const HostWork&, int begin_item, int end_item); the launcher hands out item ranges to its threads.
template <class S>
void host_gemm(const HostWork& w, int begin, int end) {
  host::Kernel<S>::run(S{}, w, begin, end);
}

}  // namespace ktune_mxfp4
