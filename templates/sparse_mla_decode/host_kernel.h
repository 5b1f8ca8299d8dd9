// sparse_mla_decode for the host CPU: the same problem, parameters and semantics as kernel.cuh (one latent KV
// head shared by every query head, each token attending to its own top-k physical slots, -1 skipped,
// fp8_ds_mla or bf16 cache rows, optional per-head sinks, LSE, split top-k with a combine pass), written as
// portable C++17 with no system headers so the LLVM host backend JIT-compiles it from the embedded templates
// exactly like NVRTC compiles the CUDA one. The numerics are the shared ones: e4m3 / bf16 decoding and
// rounding (common/numerics.cuh), the base-2 online softmax pieces and the row finalization with sinks
// (common/softmax.cuh). Unlike the GPU (bf16 K/V tiles and bf16 P for the tensor cores) everything after
// decoding stays fp32.
//
// Work decomposition (the host launcher runs ranges of items on its thread pool):
//   decode  item = ((token * (num_heads / heads_per_item)) + head_group) * num_splits + split: heads_per_item
//           query heads of one token (each gathered row is decoded once for all of them) over the split's
//           top-k positions (the GPU's split: whole tiles of kTile positions, so one workspace layout and one
//           workspace_bytes() serve both). Partials go to the workspace in the CUDA kernel's layout.
//   combine item = token * num_heads + head (only when num_splits > 1).
// Per tile: up to kTile VALID slots are collected (-1 entries are skipped before any work: a skipped entry has
// p = 0, so compacting is exact), their rows decoded to fp32 once, scores accumulated in register blocks of
// 4 heads x kUnroll rows x kVecWidth lanes (vectorizable without reassociation), then the online softmax for
// every head and O = alpha O + P V in blocks of 4 heads x 32 columns.
// The next tile's slots are collected and its rows prefetched before the current tile is computed (the rows
// are random gathers, the one memory access pattern the CPU's prefetchers cannot guess).
//
// Indices are trusted here: the host launcher (launch_host.cpp) has already refused any entry that is neither
// -1 nor a slot in [0, num_slots), so this kernel never reads outside the cache.
//
// The spec S supplies the shape and tile config either as compile-time constants (what ktune generates) or as
// run-time members (the same code built ahead of time with runtime shapes, bench/bench_host_mla.cpp); it is
// always read through an object `sp`:
//   sp.kNumHeads, kLat, kRope, kTopk, kTile, kHeadsPerItem                      shape / tile
//   S::kFp8, kVecWidth, kUnroll                                                  (constexpr)
//   S::kCapDim, kCapTile, kCapHeads: array bounds (= the exact values in a JIT specialization)
#pragma once

#include "common/numerics.cuh"
#include "common/softmax.cuh"
#include "sparse_mla_decode/params.h"

namespace ktune_mla {
namespace host {

namespace kc = ::ktune_common;

inline int imin(int a, int b) { return a < b ? a : b; }

template <class S>
struct Kernel {
  static constexpr int DM = S::kCapDim, TM = S::kCapTile, GM = S::kCapHeads;
  static constexpr int VW = S::kVecWidth, UN = S::kUnroll;
  static constexpr bool FP8 = S::kFp8;
  static constexpr int kOChunk = 32;  // output columns held in registers across a tile (kv_lora_rank % 128 == 0)
  static constexpr int HB = 4;        // heads per register block (every heads_per_item is a multiple of 4)
  static constexpr int kLanes = 16;   // lanes of the softmax max / sum reductions (every tile is a multiple)
  static_assert(VW >= 1 && (DM % VW) == 0, "kVecWidth must divide kv_lora_rank + rope_dim");
  static_assert(TM % kLanes == 0, "tiles are whole multiples of 16 slots");
  static_assert(UN >= 1 && UN <= 8, "kUnroll must be 1..8");
  static_assert(GM % HB == 0, "heads per item must be a multiple of 4");

  static inline int row_bytes(const S& sp) {
    return FP8 ? sp.kLat + 4 * (sp.kLat / 128) + 2 * sp.kRope : 2 * (sp.kLat + sp.kRope);
  }

  // One cache row -> fp32 (latent then rope). fp8_ds_mla: e4m3 through a 256-entry table built from the shared
  // decode, times its 128-value tile's fp32 scale; bf16 through the shared decode. memcpy for the unaligned-typed
  // reads (a row is bytes; the scales and rope sit at 4- and 2-byte offsets).
  static inline void decode_row(const S& sp, const unsigned char* row, const float* lut, float* dst) {
    const int LAT = sp.kLat, R = sp.kRope;
    if constexpr (FP8) {
      for (int t = 0; t < LAT / 128; ++t) {
        float s;
        __builtin_memcpy(&s, row + LAT + 4 * t, 4);
        const unsigned char* src = row + t * 128;
        float* d = dst + t * 128;
        for (int i = 0; i < 128; ++i) d[i] = lut[src[i]] * s;
      }
      const unsigned char* rope = row + LAT + 4 * (LAT / 128);
      for (int i = 0; i < R; ++i) {
        unsigned short b;
        __builtin_memcpy(&b, rope + 2 * i, 2);
        dst[LAT + i] = kc::bf16_to_float(b);
      }
    } else {
      const int D = LAT + R;
      for (int i = 0; i < D; ++i) {
        unsigned short b;
        __builtin_memcpy(&b, row + 2 * i, 2);
        dst[i] = kc::bf16_to_float(b);
      }
    }
  }

  // Scores of `rows` heads (a multiple of kHeadBlock) against rows [0, nt) of the tile: register blocks of
  // kHeadBlock heads x kUnroll rows x kVecWidth lanes, so each load of Q serves kUnroll rows and each load of a
  // row serves kHeadBlock heads (lanes reduced at the end: vectorizes without reassociation).
  static inline void scores(const S& sp, int rows, int nt, const float (*q)[DM], const float (*kf)[DM],
                            float (*sc)[TM]) {
    const int D = sp.kLat + sp.kRope;
    for (int r0 = 0; r0 < rows; r0 += HB) {
      int t = 0;
      for (; t + UN <= nt; t += UN) {
        float acc[HB][UN][VW];
        for (int h = 0; h < HB; ++h)
          for (int u = 0; u < UN; ++u)
            for (int v = 0; v < VW; ++v) acc[h][u][v] = 0.f;
        for (int d = 0; d < D; d += VW)
          for (int h = 0; h < HB; ++h)
            for (int u = 0; u < UN; ++u)
              for (int v = 0; v < VW; ++v) acc[h][u][v] += q[r0 + h][d + v] * kf[t + u][d + v];
        for (int h = 0; h < HB; ++h)
          for (int u = 0; u < UN; ++u) {
            float x = 0.f;
            for (int v = 0; v < VW; ++v) x += acc[h][u][v];
            sc[r0 + h][t + u] = x;
          }
      }
      for (; t < nt; ++t) {
        float acc[HB][VW];
        for (int h = 0; h < HB; ++h)
          for (int v = 0; v < VW; ++v) acc[h][v] = 0.f;
        for (int d = 0; d < D; d += VW)
          for (int h = 0; h < HB; ++h)
            for (int v = 0; v < VW; ++v) acc[h][v] += q[r0 + h][d + v] * kf[t][d + v];
        for (int h = 0; h < HB; ++h) {
          float x = 0.f;
          for (int v = 0; v < VW; ++v) x += acc[h][v];
          sc[r0 + h][t] = x;
        }
      }
    }
  }

  // O[r] = alpha[r] O[r] + P[r] V for `rows` heads: blocks of kHeadBlock heads x kOChunk columns held in
  // registers across the tile's rows, so each load of a V row serves kHeadBlock heads.
  static inline void accumulate(const S& sp, int rows, int nt, const float* alpha, const float (*p)[TM],
                                const float (*kf)[DM], float (*o)[DM]) {
    const int LAT = sp.kLat;
    for (int r0 = 0; r0 < rows; r0 += HB)
      for (int d0 = 0; d0 < LAT; d0 += kOChunk) {
        float acc[HB][kOChunk];
        for (int h = 0; h < HB; ++h)
          for (int i = 0; i < kOChunk; ++i) acc[h][i] = o[r0 + h][d0 + i] * alpha[r0 + h];
        for (int t = 0; t < nt; ++t) {
          const float* vrow = kf[t] + d0;
          for (int h = 0; h < HB; ++h) {
            const float pv = p[r0 + h][t];
            for (int i = 0; i < kOChunk; ++i) acc[h][i] += pv * vrow[i];
          }
        }
        for (int h = 0; h < HB; ++h)
          for (int i = 0; i < kOChunk; ++i) o[r0 + h][d0 + i] = acc[h][i];
      }
  }

  // Collects up to kTile valid slots of positions [*pos, end) into `slots`; advances *pos. Returns the count.
  static inline int collect(const S& sp, const int* idx, int* pos, int end, int* slots) {
    const int T = sp.kTile;
    int n = 0;
    int k = *pos;
    for (; k < end && n < T; ++k) {
      const int s = idx[k];
      if (s >= 0) slots[n++] = s;
    }
    *pos = k;
    return n;
  }

  static void decode_item(const S& sp, const Params& p, int token, int hg, int split) {
    const int H = sp.kNumHeads, LAT = sp.kLat, D = sp.kLat + sp.kRope, G = sp.kHeadsPerItem, T = sp.kTile;
    const int TOPK = sp.kTopk, RB = row_bytes(sp);
    const int ns = p.num_splits > 0 ? p.num_splits : 1;
    // The GPU's split of the top-k list: whole tiles of kTile positions per split.
    const int ntiles = (TOPK + T - 1) / T;
    const int per_split = (ntiles + ns - 1) / ns;
    const int k_begin = imin(TOPK, split * per_split * T);
    const int k_end = imin(TOPK, (split + 1) * per_split * T);
    const int h0 = hg * G;

    alignas(64) float q[GM][DM];
    alignas(64) float o[GM][DM];
    alignas(64) float kf[TM][DM];
    alignas(64) float sc[GM][TM];
    float m[GM], l[GM], al[GM];
    int slots[2][TM];
    float lut[FP8 ? 256 : 1];
    if constexpr (FP8)
      for (int i = 0; i < 256; ++i) lut[i] = kc::e4m3_to_float(static_cast<unsigned char>(i));

    const long long q_st = p.q_stride_token ? p.q_stride_token : (long long)H * D;  // elements (params.h)
    const long long q_sh = p.q_stride_head ? p.q_stride_head : (long long)D;
    const unsigned short* qg = static_cast<const unsigned short*>(p.q) + (long long)token * q_st + (long long)h0 * q_sh;
    for (int r = 0; r < G; ++r) {
      for (int d = 0; d < D; ++d) q[r][d] = kc::bf16_to_float(qg[(long long)r * q_sh + d]);
      for (int d = 0; d < LAT; ++d) o[r][d] = 0.f;
      m[r] = kc::neg_inf();
      l[r] = 0.f;
    }

    const float scale_log2 = p.softmax_scale * kc::kLog2e;
    const unsigned char* kv = static_cast<const unsigned char*>(p.kv_cache);
    const int* idx = p.indices + (long long)token * TOPK;
    int pos = k_begin, cur = 0;
    int nt = collect(sp, idx, &pos, k_end, slots[cur]);
    while (nt > 0) {
      // the next tile's slots, and its rows on their way while this one computes
      const int nn = collect(sp, idx, &pos, k_end, slots[cur ^ 1]);
      for (int t = 0; t < nn; ++t) {
        const unsigned char* row = kv + (long long)slots[cur ^ 1][t] * RB;
        for (int b0 = 0; b0 < RB; b0 += 64) __builtin_prefetch(row + b0);
      }
      for (int t = 0; t < nt; ++t) decode_row(sp, kv + (long long)slots[cur][t] * RB, lut, kf[t]);
      scores(sp, G, nt, q, kf, sc);

      const int ntp = (nt + kLanes - 1) / kLanes * kLanes;  // padded to whole lanes with -inf (p = 0)
      for (int r = 0; r < G; ++r) {
        float* sr = sc[r];
        for (int t = 0; t < nt; ++t) sr[t] *= scale_log2;
        for (int t = nt; t < ntp; ++t) sr[t] = kc::neg_inf();
        // Online softmax (base 2) over the tile: common/softmax.cuh, shared by the host kernels.
        const float alpha = kc::host_softmax_tile<kLanes>(sr, ntp, m[r], l[r]);
        al[r] = alpha;
      }
      accumulate(sp, G, nt, al, sc, kf, o);
      cur ^= 1;
      nt = nn;
    }

    // Epilogue: normalized output (+ LSE), or the split's partial (the CUDA kernel's workspace layout).
    const long long row0 = (long long)token * H + h0;
    for (int r = 0; r < G; ++r) {
      if (ns == 1) {
        const bool sink = p.sinks != nullptr;
        const kc::RowFinal f = kc::finalize_row(m[r], l[r], sink, sink ? p.sinks[h0 + r] : 0.f, 1.f);
        unsigned short* orow = static_cast<unsigned short*>(p.out) + (row0 + r) * LAT;
        for (int d = 0; d < LAT; ++d) orow[d] = kc::float_to_bf16(o[r][d] * f.scale);
        if (p.lse) p.lse[row0 + r] = f.lse;
      } else {
        float* po = p.workspace + ((row0 + r) * ns + split) * LAT;
        for (int d = 0; d < LAT; ++d) po[d] = o[r][d];
        float* ml = p.workspace + (long long)p.num_tokens * H * ns * LAT + ((row0 + r) * ns + split) * 2;
        ml[0] = m[r];
        ml[1] = l[r];
      }
    }
  }

  // Decode work items [begin, end).
  static void decode(const S& sp, const Params& p, int begin, int end) {
    const int ns = p.num_splits > 0 ? p.num_splits : 1;
    const int groups = sp.kNumHeads / sp.kHeadsPerItem;
    for (int item = begin; item < end; ++item) {
      const int split = item % ns, th = item / ns;
      decode_item(sp, p, th / groups, th % groups, split);
    }
  }

  // Combine items [begin, end): one (token, head) row each; merges its num_splits partials.
  static void combine(const S& sp, const Params& p, int begin, int end) {
    const int H = sp.kNumHeads, LAT = sp.kLat, ns = p.num_splits;
    alignas(64) float acc[DM];
    for (int row = begin; row < end; ++row) {
      const int head = row % H;
      const float* ml = p.workspace + (long long)p.num_tokens * H * ns * LAT + (long long)row * ns * 2;
      const float* po = p.workspace + (long long)row * ns * LAT;
      float M = kc::neg_inf();
      for (int s = 0; s < ns; ++s) M = ml[2 * s] > M ? ml[2 * s] : M;
      float L = 0.f;
      for (int d = 0; d < LAT; ++d) acc[d] = 0.f;
      for (int s = 0; s < ns; ++s) {
        const float w = kc::merge_weight(ml[2 * s], M);
        L += w * ml[2 * s + 1];
        if (w == 0.f) continue;  // an empty split: its partial is all zeros anyway
        const float* x = po + (long long)s * LAT;
        for (int d = 0; d < LAT; ++d) acc[d] += w * x[d];
      }
      const bool sink = p.sinks != nullptr;
      const kc::RowFinal f = kc::finalize_row(M, L, sink, sink ? p.sinks[head] : 0.f, 1.f);
      unsigned short* orow = static_cast<unsigned short*>(p.out) + (long long)row * LAT;
      for (int d = 0; d < LAT; ++d) orow[d] = kc::float_to_bf16(acc[d] * f.scale);
      if (p.lse) p.lse[row] = f.lse;
    }
  }
};

}  // namespace host

// Entry points of a generated host specialization (S: every member a compile-time constant). Signature:
// void(const Params&, int begin_item, int end_item); the launcher hands out item ranges to its threads.
template <class S>
void host_decode(const Params& p, int begin, int end) {
  host::Kernel<S>::decode(S{}, p, begin, end);
}
template <class S>
void host_combine(const Params& p, int begin, int end) {
  host::Kernel<S>::combine(S{}, p, begin, end);
}

}  // namespace ktune_mla
