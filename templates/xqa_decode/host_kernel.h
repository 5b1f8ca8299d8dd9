// xqa_decode for the host CPU: the same problem, parameters and semantics as kernel.cuh (paged KV, GQA,
// spec-decode q_len 1..64, causal / explicit draft masks, sinks, sliding window, softcap, LSE, split-KV with a
// combine pass), written as portable C++17 with no system headers so the LLVM host backend JIT-compiles it
// from the embedded templates exactly like NVRTC compiles the CUDA one. The numerics are the shared ones:
// element decoding and rounding (common/numerics.cuh), the draft-mask bit layout (common/mask.cuh), the
// base-2 online softmax and row finalization (common/softmax.cuh).
//
// Work decomposition (the host launcher runs ranges of items on a thread pool):
//   decode  item = ((b * num_kv_heads + kv_head) * row_groups + row_group) * num_splits + split: up to kCapRows
//           query rows of one kv head of one request (row r = q_index * group + head_in_group; row group g holds
//           rows [g * kCapRows, (g + 1) * kCapRows), row_groups = ceil(max_q_len * group / kCapRows), the
//           spec's host_row_groups), KV tiles [t_begin, t_end) of that split; split-KV partials (unnormalized
//           O, (max, sum) in log2 units) go to the workspace in the CUDA kernel's layout, so one
//           workspace_bytes() serves both.
//   combine item = (b * max_q_len + q_index) * num_q_heads + q_head (only when num_splits > 1).
// Per tile: K and V rows are decoded to fp32 once (tokens beyond the request are never read), scores are dot
// products accumulated in kVecWidth independent lanes (so they vectorize without reassociation), kUnroll
// tokens per pass share each load of Q, then the online softmax and O += P V.
//
// The spec S supplies the problem and tile config either as compile-time constants (what ktune generates:
// every shape value known to the optimizer) or as run-time members (the same code built ahead of time with
// runtime shapes, bench/bench_host.cpp); it is always read through an object `sp`:
//   sp.kHeadDim, sp.kNumKvHeads, sp.kGroupSize, sp.kPageSize, sp.kMaxQLen, sp.kTokensPerTile   shape/tile
//   S::kQType, kKVType, kOutType, kLayoutHND, kMask, kSinks, kSlidingWindow, kSoftcap, kWriteLse  (constexpr)
//   S::kVecWidth, kUnroll                                                                        (constexpr)
//   S::kCapHeadDim, kCapRows, kCapTile: array bounds (= the exact values in a JIT specialization; kCapRows is
//   also the row-group size: min(max_q_len * group, kHostRowsPerItem))
#pragma once

#include "common/dtype.h"
#include "common/mask.cuh"
#include "common/numerics.cuh"
#include "common/softmax.cuh"
#include "xqa_decode/params.h"

namespace ktune_xqa {
namespace host {

namespace kc = ::ktune_common;

inline int imin(int a, int b) { return a < b ? a : b; }
inline int imax(int a, int b) { return a > b ? a : b; }

// Element decode / encode: the one definition in common/numerics.cuh, selected at compile time.
template <int T>
inline float load_elem(const void* base, long long i) {
  if constexpr (T == kc::kBF16) return kc::bf16_to_float(static_cast<const unsigned short*>(base)[i]);
  else if constexpr (T == kc::kFP16) return kc::fp16_to_float(static_cast<const unsigned short*>(base)[i]);
  else return kc::e4m3_to_float(static_cast<const unsigned char*>(base)[i]);
}
template <int T>
inline void store_elem(void* base, long long i, float v) {
  if constexpr (T == kc::kBF16) static_cast<unsigned short*>(base)[i] = kc::float_to_bf16(v);
  else if constexpr (T == kc::kFP16) static_cast<unsigned short*>(base)[i] = kc::float_to_fp16(v);
  else static_cast<unsigned char*>(base)[i] = kc::float_to_e4m3(v);
}


template <class S>
struct Kernel {
  static constexpr int DM = S::kCapHeadDim, RM = S::kCapRows, TM = S::kCapTile;
  static constexpr int VW = S::kVecWidth, UN = S::kUnroll;
  static constexpr int KVT = S::kKVType;
  static constexpr int kOChunk = 64;  // output columns accumulated in registers (every head_dim is a multiple)
  static constexpr int kLanes = 16;   // lanes of the softmax max / sum reductions (every tile is a multiple)
  static constexpr int kMaskWords = 2;  // draft-mask words a row can have (max_q_len <= 64)
  static_assert(VW >= 1 && (DM % VW) == 0 && (TM % VW) == 0, "kVecWidth must divide head_dim and the tile");
  static_assert(TM % 16 == 0, "tiles are whole multiples of 16 tokens");
  static_assert(UN >= 1 && UN <= 8, "kUnroll must be 1..8");

  // One K or V row of D elements at element offset `e` -> fp32. e4m3 through a 256-entry table built from
  // the shared decode once per work item.
  static inline void decode_row(const S& sp, const void* kv, long long e, const float* lut, float* dst) {
    const int D = sp.kHeadDim;
    if constexpr (KVT == kc::kE4M3) {
      const unsigned char* src = static_cast<const unsigned char*>(kv) + e;
      for (int d = 0; d < D; ++d) dst[d] = lut[src[d]];
    } else {
      const unsigned short* src = static_cast<const unsigned short*>(kv) + e;
      for (int d = 0; d < D; ++d) {
        if constexpr (KVT == kc::kBF16) dst[d] = kc::bf16_to_float(src[d]);
        else dst[d] = kc::fp16_to_float(src[d]);
      }
    }
  }

  // Scores of `rows` query rows against tokens [0, nt) of the tile, in kVecWidth lanes, kUnroll tokens a pass.
  static inline void scores(const S& sp, int rows, int nt, const float (*q)[DM], const float (*kf)[DM],
                            float (*sc)[TM]) {
    const int D = sp.kHeadDim;
    for (int r = 0; r < rows; ++r) {
      const float* qr = q[r];
      int t = 0;
      for (; t + UN <= nt; t += UN) {
        float acc[UN][VW];
        for (int u = 0; u < UN; ++u)
          for (int v = 0; v < VW; ++v) acc[u][v] = 0.f;
        for (int d = 0; d < D; d += VW)
          for (int u = 0; u < UN; ++u)
            for (int v = 0; v < VW; ++v) acc[u][v] += qr[d + v] * kf[t + u][d + v];
        for (int u = 0; u < UN; ++u) {
          float x = 0.f;
          for (int v = 0; v < VW; ++v) x += acc[u][v];
          sc[r][t + u] = x;
        }
      }
      for (; t < nt; ++t) {
        float acc[VW];
        for (int v = 0; v < VW; ++v) acc[v] = 0.f;
        for (int d = 0; d < D; d += VW)
          for (int v = 0; v < VW; ++v) acc[v] += qr[d + v] * kf[t][d + v];
        float x = 0.f;
        for (int v = 0; v < VW; ++v) x += acc[v];
        sc[r][t] = x;
      }
    }
  }

  static void decode_item(const S& sp, const Params& p, int b, int kvh, int rgroup, int split) {
    const int D = sp.kHeadDim, G = sp.kGroupSize, PS = sp.kPageSize, TT = sp.kTokensPerTile;
    const int HKV = sp.kNumKvHeads, HQ = HKV * G, QL = sp.kMaxQLen;
    const Request rq = load_request(p, b, sp.kMaxQLen);
    const int n = rq.n, L = rq.L, q_start = rq.q_start;
    if (n <= 0 || L <= 0) return;  // CUDA-graph padding: read nothing, write nothing
    const int r0 = rgroup * RM;      // first row of this row group
    const int rows = imin(n * G - r0, RM);
    if (rows <= 0) return;           // a row group past this request's query rows
    const int ns = p.num_splits > 0 ? p.num_splits : 1;

    const bool win = S::kSlidingWindow && p.window_left >= 0;
    const int wl = p.window_left;
    const int kv_lo = win ? imax(0, L - n - wl) : 0;
    const int tile_lo = kv_lo / TT, tile_hi = (L + TT - 1) / TT;
    const int per_split = (tile_hi - tile_lo + ns - 1) / ns;
    const int t_begin = tile_lo + split * per_split;
    const int t_end = imin(tile_hi, t_begin + per_split);
    const int draft0 = L - n;  // first draft key

    alignas(64) float q[RM][DM];
    alignas(64) float o[RM][DM];
    alignas(64) float kf[TM][DM];
    alignas(64) float vf[TM][DM];
    alignas(64) float sc[RM][TM];
    float m[RM], l[RM];
    unsigned mword[RM][kMaskWords];  // the row's draft-mask words (the second one 0 when the mask has one)
    float lut[KVT == kc::kE4M3 ? 256 : 1];
    if constexpr (KVT == kc::kE4M3)
      for (int i = 0; i < 256; ++i) lut[i] = kc::e4m3_to_float(static_cast<unsigned char>(i));

    const Scales scl = load_scales(p);
    const long long q_st = p.q_stride_token ? p.q_stride_token : (long long)HQ * D;
    const long long q_sh = p.q_stride_head ? p.q_stride_head : (long long)D;
    const int mwords = kc::draft_mask_words(QL);  // row stride of the mask in words
    for (int r = 0; r < rows; ++r) {
      const int qi = (r0 + r) / G, gh = (r0 + r) % G;
      const long long off = (long long)(q_start + qi) * q_st + (long long)(kvh * G + gh) * q_sh;
      for (int d = 0; d < D; ++d) q[r][d] = load_elem<S::kQType>(p.q, off + d);
      for (int d = 0; d < D; ++d) o[r][d] = 0.f;
      m[r] = kc::neg_inf();
      l[r] = 0.f;
      for (int w = 0; w < kMaskWords; ++w)
        mword[r][w] = S::kMask == 2 && w < mwords ? kc::draft_mask_word(p.mask, q_start + qi, mwords, w) : 0u;
    }

    const float scale_log2 = scl.bmm1 * kc::kLog2e;
    const bool use_cap = S::kSoftcap && p.softcap > 0.f;
    const float cap_pre = use_cap ? scl.bmm1 / p.softcap : 0.f;
    const float cap_log2e = use_cap ? p.softcap * kc::kLog2e : 0.f;
    const int* bt = p.block_tables + (long long)b * p.max_pages_per_req;
    const int es = kc::dtype_size(KVT);
    // K of page i at page_elems * i; its V v_off bytes after it (params.h; 0 fields: the combined cache).
    const long long page_elems = p.kv_page_stride ? p.kv_page_stride : 2LL * HKV * PS * D;
    const long long v_off = p.kv_v_offset ? p.kv_v_offset : (long long)HKV * PS * D * es;
    const void* v_base = static_cast<const char*>(p.kv_cache) + v_off;
    const long long head_off = S::kLayoutHND ? (long long)kvh * PS * D : (long long)kvh * D;
    const long long row_stride = S::kLayoutHND ? (long long)D : (long long)HKV * D;

    const int row_bytes = D * es;
    for (int tile = t_begin; tile < t_end; ++tile) {
      const int k0 = tile * TT;
      const int nt = imin(TT, L - k0);  // tokens of the request in this tile (never read past L)
      if (tile + 1 < t_end) {  // the next tile's K and V rows are on their way while this one computes
        const int nn = imin(TT, L - k0 - TT);
        for (int t = 0; t < nn; ++t) {
          const int k = k0 + TT + t;
          const char* e = static_cast<const char*>(p.kv_cache) +
                          ((long long)bt[k / PS] * page_elems + head_off + (k % PS) * row_stride) * es;
          for (int b0 = 0; b0 < row_bytes; b0 += 64) {
            __builtin_prefetch(e + b0);
            __builtin_prefetch(e + v_off + b0);
          }
        }
      }
      for (int t = 0; t < nt; ++t) {
        const int k = k0 + t;
        const long long e = (long long)bt[k / PS] * page_elems + head_off + (k % PS) * row_stride;
        decode_row(sp, p.kv_cache, e, lut, kf[t]);
        decode_row(sp, v_base, e, lut, vf[t]);
      }
      scores(sp, rows, nt, q, kf, sc);

      const bool need_mask = (k0 + nt > draft0) || (win && k0 < L - 1 - wl);
      const int ntp = (nt + kLanes - 1) / kLanes * kLanes;  // scores padded to whole lanes with -inf (p = 0)
      for (int r = 0; r < rows; ++r) {
        float* sr = sc[r];
        if (use_cap) {
          for (int t = 0; t < nt; ++t) sr[t] = kc::softcap_log2(sr[t] * cap_pre, cap_log2e);
        } else {
          for (int t = 0; t < nt; ++t) sr[t] *= scale_log2;
        }
        for (int t = nt; t < ntp; ++t) sr[t] = kc::neg_inf();
        if (need_mask) {
          const int qi = (r0 + r) / G;
          for (int t = 0; t < nt; ++t) {
            const int k = k0 + t;
            bool vis = true;
            if (k >= draft0) {
              const int jd = k - draft0;
              vis = S::kMask == 2 ? kc::draft_mask_bit<kMaskWords>(mword[r], jd) : jd <= qi;
            }
            if (win) vis = vis && k >= draft0 + qi - wl;
            if (!vis) sr[t] = kc::neg_inf();
          }
        }
        // Online softmax (base 2) over the tile: common/softmax.cuh, shared by the host kernels.
        const float alpha = kc::host_softmax_tile<kLanes>(sr, ntp, m[r], l[r]);
        // O = alpha O + P V, kOChunk columns at a time held in registers across the tile's tokens.
        float* orow = o[r];
        for (int d0 = 0; d0 < D; d0 += kOChunk) {
          float acc[kOChunk];
          for (int i = 0; i < kOChunk; ++i) acc[i] = orow[d0 + i] * alpha;
          for (int t = 0; t < nt; ++t) {
            const float pv = sr[t];
            const float* vrow = vf[t] + d0;
            for (int i = 0; i < kOChunk; ++i) acc[i] += pv * vrow[i];
          }
          for (int i = 0; i < kOChunk; ++i) orow[d0 + i] = acc[i];
        }
      }
    }

    // Epilogue: normalized output (+ LSE), or the split's partial.
    const float* sinks = S::kSinks ? p.sinks : nullptr;
    const long long o_st = p.out_stride_token ? p.out_stride_token : (long long)HQ * D;
    const long long o_sh = p.out_stride_head ? p.out_stride_head : (long long)D;
    for (int r = 0; r < rows; ++r) {
      const int qi = (r0 + r) / G, hq = kvh * G + (r0 + r) % G;
      if (ns == 1) {
        const kc::RowFinal f = kc::finalize_row(m[r], l[r], sinks != nullptr, sinks ? sinks[hq] : 0.f, scl.bmm2);
        const long long off = (long long)(q_start + qi) * o_st + (long long)hq * o_sh;
        for (int d = 0; d < D; ++d) store_elem<S::kOutType>(p.out, off + d, o[r][d] * f.scale);
        if (S::kWriteLse && p.lse) p.lse[(long long)(q_start + qi) * HQ + hq] = f.lse;
      } else {
        const long long ws_rows = (long long)p.batch * QL * HQ;
        const long long rowid = ((long long)b * QL + qi) * HQ + hq;
        float* ml = p.workspace + ws_rows * ns * D + (rowid * ns + split) * 2;
        ml[0] = m[r];
        ml[1] = l[r];
        float* po = p.workspace + (rowid * ns + split) * D;
        for (int d = 0; d < D; ++d) po[d] = o[r][d];
      }
    }
  }

  // Decode work items [begin, end).
  static void decode(const S& sp, const Params& p, int begin, int end) {
    const int ns = p.num_splits > 0 ? p.num_splits : 1;
    const int rgs = (sp.kMaxQLen * sp.kGroupSize + RM - 1) / RM;
    for (int item = begin; item < end; ++item) {
      const int split = item % ns, bkg = item / ns, rg = bkg % rgs, bk = bkg / rgs;
      decode_item(sp, p, bk / sp.kNumKvHeads, bk % sp.kNumKvHeads, rg, split);
    }
  }

  // Combine items [begin, end): one (request, query token, q head) row each; merges its num_splits partials.
  static void combine(const S& sp, const Params& p, int begin, int end) {
    const int D = sp.kHeadDim, HQ = sp.kNumKvHeads * sp.kGroupSize, QL = sp.kMaxQLen;
    const int ns = p.num_splits;
    const long long ws_rows = (long long)p.batch * QL * HQ;
    const float* sinks = S::kSinks ? p.sinks : nullptr;
    const float bmm2 = load_scales(p).bmm2;
    const long long o_st = p.out_stride_token ? p.out_stride_token : (long long)HQ * D;
    const long long o_sh = p.out_stride_head ? p.out_stride_head : (long long)D;
    alignas(64) float acc[DM];
    for (int row = begin; row < end; ++row) {
      const int hq = row % HQ, bq = row / HQ, qi = bq % QL, b = bq / QL;
      const Request rq = load_request(p, b, sp.kMaxQLen);
      if (rq.n <= 0 || rq.L <= 0 || qi >= rq.n) continue;
      const long long rowid = row;
      const float* ml = p.workspace + ws_rows * ns * D + rowid * ns * 2;
      const float* po = p.workspace + rowid * ns * D;
      float M = kc::neg_inf();
      for (int s = 0; s < ns; ++s) M = ml[2 * s] > M ? ml[2 * s] : M;
      float Lsum = 0.f;
      for (int d = 0; d < D; ++d) acc[d] = 0.f;
      for (int s = 0; s < ns; ++s) {
        const float w = kc::merge_weight(ml[2 * s], M);
        Lsum += w * ml[2 * s + 1];
        if (w == 0.f) continue;
        const float* x = po + (long long)s * D;
        for (int d = 0; d < D; ++d) acc[d] += w * x[d];
      }
      const kc::RowFinal f = kc::finalize_row(M, Lsum, sinks != nullptr, sinks ? sinks[hq] : 0.f, bmm2);
      const long long off = (long long)(rq.q_start + qi) * o_st + (long long)hq * o_sh;
      for (int d = 0; d < D; ++d) store_elem<S::kOutType>(p.out, off + d, acc[d] * f.scale);
      if (S::kWriteLse && p.lse) p.lse[(long long)(rq.q_start + qi) * HQ + hq] = f.lse;
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

}  // namespace ktune_xqa
