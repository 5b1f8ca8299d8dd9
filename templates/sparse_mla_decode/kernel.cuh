// sparse_mla_decode: DeepSeek-V3.2-style sparse MLA decode (absorbed form: one latent KV head shared by every
// query head), each query token attending to its own top-k cache slots.
//
// One CTA per (head group of kHeadsPerCta heads, top-k split, token); kWarps (8 or 16) warps. The CTA's heads are the M
// dimension of mma.sync m16n8k16 (bf16, fp32 accumulate), so each gathered KV row is read once for all of them.
// Per tile of kTile selected slots:
//   gather   cp.async 16-byte chunks, each row from its own slot (a kStages-deep ring, or kStages = 1: one raw
//            tile re-gathered once dequantized; -1 / past-topk rows are zero-filled and masked). The tile's top-k
//            entries were cp.async'ed to smem one gather earlier, so issuing a gather never waits on a global
//            load (that wait cost 27% at 128 heads). fp8_ds_mla rows land raw and are dequantized (e4m3 x
//            per-128 fp32 scale -> bf16) into one bf16 K/V tile; bf16 rows land in the ring directly. Q and K/V
//            tiles use the k-block-major 128-byte-swizzle layout (tile_off).
//   S = Q K^T over the full 576-wide dim: kWgmma (sm_90a): one wgmma chain per warpgroup (64 heads x its
//            tokens); else mma.sync with warps splitting the (heads x tokens) score tile. Scores go to smem as
//            fp32.
//   softmax  threads / kHeadsPerCta threads per head row: online max/sum in the log2 domain, P (bf16) to smem,
//            the per-row rescale factor to smem.
//   O += P V each warp owns kv_lora_rank / kWarps output columns for every head of the CTA (accumulators in
//            registers: 64 heads x 64 columns = 128 fp32 per thread with 8 warps, 64 with 16); V is the latent
//            part of the same bf16 tile.
// Splits > 1 write unnormalized fp32 partials + (max, sum) per row to the workspace; combine_kernel merges.
// A row with no valid slot (and no sink) gets O = 0 and LSE = -inf.
#pragma once

#include "common/dtype.h"
#include "common/numerics.cuh"
#include "common/mma.cuh"
#include "common/async_copy.cuh"
#include "common/softmax.cuh"
#include "common/wgmma.cuh"
#include "common/checked.h"
#include "common/pdl.cuh"
#include "sparse_mla_decode/params.h"
#include "sparse_mla_decode/shape.h"

namespace ktune_mla {

namespace kc = ::ktune_common;

template <class S>
struct Traits {
  static constexpr Shape sh = make_shape(S::kLat, S::kRope, S::kFp8, S::kHeadsPerCta, S::kTile, S::kStages, S::kWarps);
  static_assert(shape_error(sh) == nullptr, "invalid sparse_mla_decode shape (see shape_error)");
  static_assert(S::kNumHeads % S::kHeadsPerCta == 0, "heads per CTA must divide num_heads");
  static_assert(!S::kWgmma || (S::kHeadsPerCta == 64 && S::kTile / (sh.threads / 128) >= 8),
                "wgmma needs 64 heads per CTA and at least 8 tokens per warpgroup");
};

// Byte offset of 16-byte chunk `ch` of row `row` in a Q or K/V tile of `rows` rows: k-block major (blocks of 64
// bf16 = 128 bytes per row, rows 128 bytes apart, a block after all rows), chunks XOR-swizzled by row % 8. This
// is the canonical 128-byte-swizzle K-major layout of Hopper wgmma operands (8-row atoms of 1024 bytes), and
// conflict-free for ldmatrix.
KT_DEV int tile_off(int rows, int row, int ch) { return (ch >> 3) * rows * 128 + row * 128 + (((ch & 7) ^ (row & 7)) << 4); }
// P rows: kTile / 8 chunks (4 or 8).
template <int kChunks>
KT_DEV int swzp(int row, int ch) {
  if constexpr (kChunks >= 8) return ch ^ (row & 7);
  else return ch ^ ((row >> 1) & 3);
}

// f16x2 (exact e4m3 values / kE4m3Fold) -> bf16x2 of value * s.
KT_DEV unsigned f16x2_to_bf16x2_scaled(unsigned h, float s) {
  float lo, hi;
  asm("{ .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.f32.f16 %0, a;\n cvt.f32.f16 %1, b; }"
      : "=f"(lo), "=f"(hi)
      : "r"(h));
  return kc::pack_bf16x2(lo * s, hi * s);
}


// cp.async of the CTA's Q rows (heads h0.. h0 + HG of `token`, D bf16 each) into the tile_off layout at sQ, by
// threads tid, tid + nthreads, ... (the caller commits and waits).
template <int H, int HG, int D>
KT_DEV void issue_q_tile(const Params& p, unsigned sQ, int token, int h0, int tid, int nthreads) {
  constexpr int QCH = D / 8;
  const long long st = p.q_stride_token ? p.q_stride_token : (long long)H * D;  // elements (params.h)
  const long long sh = p.q_stride_head ? p.q_stride_head : (long long)D;
  const char* qg = static_cast<const char*>(p.q) + ((long long)token * st + (long long)h0 * sh) * 2;
  for (int i = tid; i < HG * QCH; i += nthreads) {
    const int r = i / QCH, c = i % QCH;
    kc::cp_async_16(sQ + tile_off(HG, r, c), qg + (long long)r * sh * 2 + c * 16, 16);
  }
}

// Rows r0 and r0 + 8 of a warpgroup's O fragments times their online-softmax factors a0, a1; skipped when the
// whole warp's factors are 1 (the running max held; x * 1 = x, so the result is the same).
template <int NO>
KT_DEV void rescale_o_rows(float (&o)[1][NO][4], float a0, float a1) {
  if (__any_sync(0xffffffffu, a0 != 1.f || a1 != 1.f)) {
#pragma unroll
    for (int n = 0; n < NO; ++n) {
      o[0][n][0] *= a0;
      o[0][n][1] *= a0;
      o[0][n][2] *= a1;
      o[0][n][3] *= a1;
    }
  }
}

// One fp8_ds_mla cache row holds LAT/16 latent items (16 e4m3 values: a 16-byte chunk, scaled by its 128-block's
// fp32 scale, become two bf16 chunks) then ROPE/8 rope items (a 16-byte bf16 chunk, copied).
struct RawItem {
  uint4 v;   // the item's 16 raw bytes
  float sc;  // latent items: the block scale * kE4m3Fold
};
template <int LAT>
KT_DEV RawItem load_item(const unsigned char* row, int c) {
  constexpr int LCH = LAT / 16;
  RawItem it;
  if (c < LCH) {
    it.v = *reinterpret_cast<const uint4*>(row + c * 16);
    it.sc = reinterpret_cast<const float*>(row + LAT)[c >> 3] * kc::kE4m3Fold;
  } else {
    it.v = *reinterpret_cast<const uint4*>(row + LAT + 4 * (LAT / 128) + (c - LCH) * 16);
    it.sc = 0.f;
  }
  return it;
}
// Latent item -> its 16 bf16 values (two 16-byte chunks).
KT_DEV void dequant_item(const RawItem& it, uint4& lo16, uint4& hi16) {
  const unsigned w[4] = {it.v.x, it.v.y, it.v.z, it.v.w};
  unsigned out[8];
#pragma unroll
  for (int q = 0; q < 4; ++q) {
    unsigned lo, hi;
    kc::e4m3x4_to_f16x2x2<false>(w[q], lo, hi);
    out[2 * q] = f16x2_to_bf16x2_scaled(lo, it.sc);
    out[2 * q + 1] = f16x2_to_bf16x2_scaled(hi, it.sc);
  }
  lo16 = make_uint4(out[0], out[1], out[2], out[3]);
  hi16 = make_uint4(out[4], out[5], out[6], out[7]);
}
// Item c of a row, loaded, into row r of a bf16 K/V tile (tile_off layout, TN rows).
template <int LAT, int TN>
KT_DEV void store_item(const RawItem& it, unsigned char* kvt, int r, int c) {
  constexpr int LCH = LAT / 16;
  if (c < LCH) {
    uint4 lo, hi;
    dequant_item(it, lo, hi);
    *reinterpret_cast<uint4*>(kvt + tile_off(TN, r, 2 * c)) = lo;
    *reinterpret_cast<uint4*>(kvt + tile_off(TN, r, 2 * c + 1)) = hi;
  } else {
    *reinterpret_cast<uint4*>(kvt + tile_off(TN, r, LAT / 8 + (c - LCH))) = it.v;
  }
}
// A raw tile (TN rows of RB bytes) into the bf16 K/V tile by NT threads, thread tid taking items tid, tid + NT, ...
// U items are loaded before any of them is stored (the raw and K/V tiles are both shared memory, so stores
// fence later loads). The library uses U = 1: the fixed, fully unrolled item loop is what makes this fast, larger
// batches ran no faster and spill at 16 warps.
template <int LAT, int ROPE, int TN, int RB, int NT, int U>
KT_DEV void dequant_tile(const unsigned char* raw, unsigned char* kvt, int tid) {
  constexpr int ITEMS = LAT / 16 + ROPE / 8, TOTAL = TN * ITEMS, PER = (TOTAL + NT - 1) / NT;
#pragma unroll
  for (int k0 = 0; k0 < PER; k0 += U) {
    RawItem it[U];
    int row[U], col[U];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = tid + (k0 + u) * NT;
      row[u] = i / ITEMS;
      col[u] = i - row[u] * ITEMS;
      if (k0 + u < PER && (TOTAL % NT == 0 || i < TOTAL)) it[u] = load_item<LAT>(raw + row[u] * RB, col[u]);
    }
#pragma unroll
    for (int u = 0; u < U; ++u) {
      const int i = tid + (k0 + u) * NT;
      if (k0 + u < PER && (TOTAL % NT == 0 || i < TOTAL)) store_item<LAT, TN>(it[u], kvt, row[u], col[u]);
    }
  }
}

// ---- Hopper wgmma (sm_90a only; Spec::kWgmma is set by the spec for sm_90a alone): the instructions, fences,
// commit/wait and the descriptors of tile_off() tiles come from common/wgmma.cuh.

// The wgmma descriptor of V rows 16 kk .. 16 kk + 15 and 128 output columns from col0 (a multiple of 64) in a K/V
// tile at sK (TN rows, tile_off layout), read as an MN-major operand.
template <int TN>
KT_DEV unsigned long long v_desc(unsigned sK, int col0, int kk) {
  return kc::wg_desc_mn(sK + (col0 / 64) * TN * 128 + kk * 16 * 128, TN * 128, 1024);
}

// O += P V for one warpgroup by wgmma: all 64 heads x the COLS output columns from ocol0 (m64n128k16 per k step
// and 128 columns). P (64 x TN bf16, K-major, rows 128-byte swizzled) at sP; V is the latent part of the K/V tile
// at sK (TN rows, tile_off layout), read as an MN-major operand. o holds this thread's fragments as qk_wgmma_regs
// lays them out, per 8-column group of its columns. Returns when the wgmma have completed.
template <int TN, int COLS>
KT_DEV void pv_wgmma(float (&o)[1][COLS / 8][4], unsigned sP, unsigned sK, int ocol0) {
  kc::wg_fence();
#pragma unroll
  for (int kk = 0; kk < TN / 16; ++kk)
#pragma unroll
    for (int hh = 0; hh < COLS / 128; ++hh)
      kc::wgmma_ss<128, true, true>(&o[0][16 * hh][0], kc::wg_desc_k128(sP) + (unsigned)((kk * 32) >> 4),
                                    v_desc<TN>(sK, ocol0 + 128 * hh, kk), 1);
  kc::wg_commit();
  kc::wg_wait<0>();
}

// pv_wgmma with P from registers: d holds the tile's probabilities in qk_wgmma_regs' accumulator layout (TN
// columns), which is the A-fragment layout of a register-operand wgmma; they are rounded to bf16 as softmax_regs
// rounds them for shared memory, so the result is the same.
template <int TN, int COLS>
KT_DEV void pv_wgmma_regs(float (&o)[1][COLS / 8][4], const float (&d)[TN / 2], unsigned sK, int ocol0) {
  kc::wg_fence();
#pragma unroll
  for (int kk = 0; kk < TN / 16; ++kk) {
    unsigned pa[4];
    kc::acc_to_a_frag<true>(pa, d + 8 * kk);
#pragma unroll
    for (int hh = 0; hh < COLS / 128; ++hh)
      kc::wgmma_rs<128, true, true>(&o[0][16 * hh][0], pa, v_desc<TN>(sK, ocol0 + 128 * hh, kk), 1);
  }
  kc::wg_commit();
  kc::wg_wait<0>();
}

// S = Q K^T for one warpgroup by wgmma: all HG (= 64) heads x its WN tokens (rows wg * WN.. of the K/V tile at
// sK, TN rows), K = D in steps of 16, Q at sQ (HG rows); both in the tile_off layout. The fp32 scores go to s_S
// (row stride ss floats, column = token within the tile). Descriptors advance by (byte offset >> 4) in their
// start-address field (no carry: shared memory < 256 KB).
// qk_wgmma_regs leaves the scores in registers: d[4j + {0,1}] = (row 16 * warp_in_wg + g, columns wg * WN + 8j +
// 2 t4 + {0,1}), d[4j + {2,3}] = (that row + 8, same columns), g = lane / 4, t4 = lane % 4.
template <int HG, int TN, int WN, int D>
KT_DEV void qk_wgmma_regs(float (&d)[WN / 2], unsigned sQ, unsigned sK, int wg) {
#pragma unroll
  for (int i = 0; i < WN / 2; ++i) d[i] = 0.f;
  kc::wg_fence();
  const unsigned long long dq = kc::wg_desc_k128(sQ), dk = kc::wg_desc_k128(sK + wg * WN * 128);
#pragma unroll 1
  for (int kb = 0; kb < D / 64; ++kb)
#pragma unroll
    for (int kk = 0; kk < 4; ++kk)
      kc::wgmma_ss<WN, true, false>(d, dq + (unsigned)((kb * HG * 128 + kk * 32) >> 4),
                                    dk + (unsigned)((kb * TN * 128 + kk * 32) >> 4), (kb | kk) != 0);
  kc::wg_commit();
  kc::wg_wait<0>();
  kc::wg_hold(d);
}
template <int HG, int TN, int WN, int D>
KT_DEV void qk_wgmma(unsigned sQ, unsigned sK, int wg, int warp_in_wg, int lane, float* s_S, int ss) {
  float d[WN / 2];
  qk_wgmma_regs<HG, TN, WN, D>(d, sQ, sK, wg);
  const int g = lane >> 2, t4 = lane & 3;
#pragma unroll
  for (int j = 0; j < WN / 8; ++j) {
    const int r0 = warp_in_wg * 16 + g, col = wg * WN + j * 8 + 2 * t4;
    *reinterpret_cast<float2*>(s_S + r0 * ss + col) = make_float2(d[4 * j], d[4 * j + 1]);
    *reinterpret_cast<float2*>(s_S + (r0 + 8) * ss + col) = make_float2(d[4 * j + 2], d[4 * j + 3]);
  }
}

// 4-byte cp.async (zero-fills when src_bytes == 0).
KT_DEV void cp_async_4(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}

// One tile of the online softmax (log2 domain), TPR threads per head row, thread t of the participating ones:
// row t / TPR, columns (t % TPR) * TN / TPR..; masked slots (< 0) score -inf. Updates the row's running max and
// sum (m_run, l_run: the same in the TPR threads), writes the row's rescale factor to s_alpha and P (bf16) to
// `p_tile` (rows of TN bf16, chunks swizzled by swzp).
template <int TN, int TPR>
KT_DEV void softmax_tile(int t, const float* s_S, int ss, const int* slots, float scale_log2, float& m_run,
                         float& l_run, float* s_alpha, unsigned char* p_tile) {
  constexpr int EPT = TN / TPR, PCH = TN / 8;
  const int r = t / TPR, c0 = (t % TPR) * EPT;
  float x[EPT];
  float mx = kc::neg_inf();
#pragma unroll
  for (int e = 0; e < EPT; ++e) {
    float v = s_S[r * ss + c0 + e] * scale_log2;
    if (slots[c0 + e] < 0) v = kc::neg_inf();
    x[e] = v;
    mx = fmaxf(mx, v);
  }
#pragma unroll
  for (int off = 1; off < TPR; off <<= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, off));
  const kc::MaxStep st = kc::online_max_step(m_run, fmaxf(m_run, mx));
  const float m_use = st.m_use, alpha = st.alpha;
  float sum = 0.f;
#pragma unroll
  for (int e = 0; e < EPT; ++e) {
    x[e] = kc::fast_exp2(x[e] - m_use);
    sum += x[e];
  }
#pragma unroll
  for (int off = 1; off < TPR; off <<= 1) sum += __shfl_xor_sync(0xffffffffu, sum, off);
  l_run = l_run * alpha + sum;
  if (t % TPR == 0) s_alpha[r] = alpha;
  unsigned char* prow = p_tile + r * TN * 2;
#pragma unroll
  for (int e = 0; e < EPT; e += 2) {
    const int col = c0 + e;
    *reinterpret_cast<unsigned*>(prow + swzp<PCH>(r, col >> 3) * 16 + (col & 7) * 2) = kc::pack_bf16x2(x[e], x[e + 1]);
  }
}

// The online softmax of one tile on the scores left in registers (the accumulator layout of wgmma and of an
// m16n8k16 mma.sync tile): this thread's rows r0 and r0 + 8, columns wg * WN + 8 j + 2 t4 (+1) for j < WN / 8;
// NWG column blocks (warpgroups of the P.V-by-wgmma path, each holding 4 of a row's 16-row groups) split the
// tile's columns. The row max needs every block's columns: each block's quad-reduced partial goes through
// s_pmax[wg * HG + row] and one CTA barrier.
// The running max (m_run) is the same in every thread of a row; the running sum (l_run) covers this block's
// columns only (the epilogue adds them up). Writes P (bf16) to p_tile (rows of TN, chunks swizzled by swzp) and
// returns the rows' rescale factors in alpha.
template <int HG, int TN, int WN, int NWG>
KT_DEV void softmax_regs(float (&d)[WN / 2], const int* slots, int wg, int r0, int t4, float scale_log2,
                         float (&m_run)[2], float (&l_run)[2], float (&alpha)[2], float* s_pmax,
                         unsigned char* p_tile) {
  float mx[2] = {kc::neg_inf(), kc::neg_inf()};
#pragma unroll
  for (int j = 0; j < WN / 8; ++j)
#pragma unroll
    for (int e = 0; e < 2; ++e) {
      const bool masked = slots[wg * WN + 8 * j + 2 * t4 + e] < 0;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float& v = d[4 * j + 2 * h + e];
        v = masked ? kc::neg_inf() : v * scale_log2;
        mx[h] = fmaxf(mx[h], v);
      }
    }
#pragma unroll
  for (int h = 0; h < 2; ++h) mx[h] = kc::quad_max(mx[h]);
  if constexpr (NWG > 1) {  // one warpgroup (the 64-head warp-specialized kernel) holds whole rows: no exchange
    if (t4 == 0) {
      s_pmax[wg * HG + r0] = mx[0];
      s_pmax[wg * HG + r0 + 8] = mx[1];
    }
    __syncthreads();
  }
  float m_use[2], sum[2] = {0.f, 0.f};
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float row_max = NWG > 1 ? kc::neg_inf() : mx[h];
#pragma unroll
    for (int w = 0; w < (NWG > 1 ? NWG : 0); ++w) row_max = fmaxf(row_max, s_pmax[w * HG + r0 + 8 * h]);
    const kc::MaxStep st = kc::online_max_step(m_run[h], fmaxf(m_run[h], row_max));
    m_use[h] = st.m_use;
    alpha[h] = st.alpha;
  }
#pragma unroll
  for (int j = 0; j < WN / 8; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        float& v = d[4 * j + 2 * h + e];
        v = kc::fast_exp2(v - m_use[h]);
        sum[h] += v;
      }
#pragma unroll
  for (int h = 0; h < 2; ++h) l_run[h] = l_run[h] * alpha[h] + kc::quad_sum(sum[h]);
#pragma unroll
  for (int j = 0; j < WN / 8; ++j) {
    const int col = wg * WN + 8 * j + 2 * t4;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = r0 + 8 * h;
      *reinterpret_cast<unsigned*>(p_tile + r * TN * 2 + swzp<TN / 8>(r, col >> 3) * 16 + (col & 7) * 2) =
          kc::pack_bf16x2(d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
    }
  }
}

// The four lanes of a quad (t4 = lane & 3) each hold w[i] = words of column block i of one row (lane t4: columns
// 8 i + 2 t4, + 1); afterwards lane t4 holds the four words of block t4 in column order (columns 8 t4 .. 8 t4 + 7).
// Two exchanges (lane bit 1, then bit 0), each swapping the half of the blocks in which this lane's bit differs
// from the block's. Every lane of the warp must take part.
KT_DEV void quad_transpose(unsigned (&w)[4], int t4) {
#pragma unroll
  for (int m = 2; m >= 1; m >>= 1) {
    const bool up = (t4 & m) != 0;
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (i & m) continue;
      const unsigned got = __shfl_xor_sync(0xffffffffu, up ? w[i] : w[i | m], m);
      if (up)
        w[i] = got;
      else
        w[i | m] = got;
    }
  }
}

// The LSE of the CTA's rows (one split), by threads t < HG.
template <class S>
KT_DEV void write_lse(const Params& p, const float* s_m, const float* s_l, int h0, int token, int t) {
  if (p.lse != nullptr && t < S::kHeadsPerCta) {
    const kc::RowFinal f =
        kc::finalize_row(s_m[t], s_l[t], p.sinks != nullptr, p.sinks != nullptr ? p.sinks[h0 + t] : 0.f, 1.f);
    p.lse[(long long)token * S::kNumHeads + h0 + t] = f.lse;
  }
}
// Epilogue of one CTA: O (this thread's fragments: rows orow0 + 16 mt + g (+8), columns ocol0 + 8 n + 2 t4) and
// the rows' (max, sum) from s_m / s_l, as the bf16 output + LSE (one split: write_rows) or fp32 partials (splits
// > 1: write_partials). t is the thread's index among the participating threads (the first HG write the per-row
// values); all of a warp's lanes take part.
// The bf16 rows: a quad holds 32 bytes of a row per column block, 4 bytes a lane, so a warp's 4-byte store of one
// block writes half of each of 8 sectors, and the memory system takes half-sector writes far more slowly than
// whole ones (docs/sparse_mla_decode.md, "Where a launch's time goes"). With ONO a multiple of 4 the quad
// exchanges its words first (quad_transpose) and each lane stores 16 contiguous bytes: whole sectors, a quarter
// of the instructions. `out` need only be 4-byte aligned, so a row that is not 16-byte aligned stores the same
// words 4 bytes at a time.
template <class S, int OMT, int ONO>
KT_DEV void write_rows(const Params& p, const float (&o)[OMT][ONO][4], const float* s_m, const float* s_l, int h0,
                       int token, int orow0, int ocol0, int g, int t4, int t) {
  constexpr int LAT = S::kLat, H = S::kNumHeads;
  const long long row0 = (long long)token * H + h0;
  // Every row (LAT * 2 bytes) and column block (ocol0, 8-column blocks) starts 16-byte aligned relative to out,
  // so out's own alignment decides whether the 16-byte stores may be used.
  const bool out16 = (reinterpret_cast<unsigned long long>(p.out) & 15) == 0;
#pragma unroll
  for (int mt = 0; mt < OMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = orow0 + mt * 16 + g + 8 * h;
      const kc::RowFinal f = kc::finalize_row(s_m[r], s_l[r], p.sinks != nullptr,
                                              p.sinks != nullptr ? p.sinks[h0 + r] : 0.f, 1.f);
      unsigned short* orow = static_cast<unsigned short*>(p.out) + (row0 + r) * LAT + ocol0;
      if constexpr (ONO % 4 == 0) {
#pragma unroll
        for (int q = 0; q < ONO / 4; ++q) {
          unsigned w[4];
#pragma unroll
          for (int i = 0; i < 4; ++i)
            w[i] = kc::pack_bf16x2(o[mt][4 * q + i][2 * h] * f.scale, o[mt][4 * q + i][2 * h + 1] * f.scale);
          quad_transpose(w, t4);
          unsigned short* dst = orow + (4 * q + t4) * 8;
          if (out16) {
            *reinterpret_cast<uint4*>(dst) = make_uint4(w[0], w[1], w[2], w[3]);
          } else {
#pragma unroll
            for (int j = 0; j < 4; ++j) *reinterpret_cast<unsigned*>(dst + 2 * j) = w[j];
          }
        }
      } else {
#pragma unroll
        for (int n = 0; n < ONO; ++n)
          *reinterpret_cast<unsigned*>(orow + 2 * t4 + n * 8) =
              kc::pack_bf16x2(o[mt][n][2 * h] * f.scale, o[mt][n][2 * h + 1] * f.scale);
      }
    }
  write_lse<S>(p, s_m, s_l, h0, token, t);
}
template <class S, int OMT, int ONO>
KT_DEV void write_partials(const Params& p, const float (&o)[OMT][ONO][4], const float* s_m, const float* s_l,
                           int h0, int token, int split, int orow0, int ocol0, int g, int t4, int t) {
  constexpr int LAT = S::kLat, H = S::kNumHeads, HG = S::kHeadsPerCta;
  const long long row0 = (long long)token * H + h0;
  const int ns = p.num_splits;
#pragma unroll
  for (int mt = 0; mt < OMT; ++mt)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int r = orow0 + mt * 16 + g + 8 * h;
      float* prow = p.workspace + ((row0 + r) * ns + split) * LAT + ocol0 + 2 * t4;
#pragma unroll
      for (int n = 0; n < ONO; ++n)
        *reinterpret_cast<float2*>(prow + n * 8) = make_float2(o[mt][n][2 * h], o[mt][n][2 * h + 1]);
    }
  if (t < HG) {
    float* ml = p.workspace + (long long)p.num_tokens * H * ns * LAT + ((row0 + t) * ns + split) * 2;
    ml[0] = s_m[t];
    ml[1] = s_l[t];
  }
}
template <class S, int OMT, int ONO>
KT_DEV void write_output(const Params& p, const float (&o)[OMT][ONO][4], const float* s_m, const float* s_l, int h0,
                         int token, int split, int orow0, int ocol0, int g, int t4, int t) {
  if (p.num_splits == 1)
    write_rows<S>(p, o, s_m, s_l, h0, token, orow0, ocol0, g, t4, t);
  else
    write_partials<S>(p, o, s_m, s_l, h0, token, split, orow0, ocol0, g, t4, t);
}

// The local tiles of the top-k that split `split` of p.num_splits covers: t_begin .. t_begin + ntiles - 1 (the
// last splits may have none).
struct SplitTiles {
  int t_begin, ntiles;
};
template <int NTILES>
KT_DEV SplitTiles split_tiles(const Params& p, int split) {
  const int per_split = (NTILES + p.num_splits - 1) / p.num_splits;
  const int t_begin = split * per_split;
  return {t_begin, max(0, min(NTILES, t_begin + per_split) - t_begin)};
}

template <class S>
KT_DEV void decode_body(const Params& p) {
  constexpr Shape sh = Traits<S>::sh;
  constexpr int LAT = S::kLat, D = sh.dim, HG = S::kHeadsPerCta, TN = S::kTile;
  constexpr int ST = S::kStages, H = S::kNumHeads, TOPK = S::kTopk;
  constexpr bool FP8 = S::kFp8;
  constexpr int RB = sh.raw_bytes, RCH = sh.raw_chunks, RAW_TILE = mla_align16(sh.raw_tile_bytes);
  constexpr int WM = sh.warps_m, MTW = sh.mt_per_warp, NTW = sh.nt_per_warp, MT = sh.m_tiles;
  constexpr int TPR = sh.tpr, PCH = TN / 8, SS = sh.s_stride;
  constexpr int CPW = sh.cols_per_warp, ONT = CPW / 8;
  constexpr int NTILES = (TOPK + TN - 1) / TN, NT = sh.threads;
  constexpr int SB = sh.slot_buffers;  // slot lists of the tiles in flight
  static_assert(ONT % 2 == 0, "output n tiles per warp must be even");
  // P.V through wgmma as well (sm_90a, 64-token tiles): warpgroup w owns output columns [w, w + 1) * LAT / NWG
  // for all 64 heads, P (K-major, from the softmax) and V (MN-major: the K/V tile as stored) from shared memory.
  constexpr int NWG = sh.threads / 128;
  constexpr bool WGPV = S::kWgmma && TN == 64 && (LAT / NWG) % 128 == 0 && sh.off_p % 1024 == 0 &&
                        sh.off_kv % 1024 == 0;
  constexpr int OMT = WGPV ? 1 : MT;                    // 16-row tiles of O per warp
  constexpr int ONO = WGPV ? LAT / NWG / 8 : ONT;       // 8-column tiles of O per warp

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int g = lane >> 2, t4 = lane & 3, lr = lane & 7, lm = lane >> 3;
  const int h0 = blockIdx.x * HG, split = blockIdx.y, token = blockIdx.z;
  const SplitTiles tiles = split_tiles<NTILES>(p, split);
  const int t_begin = tiles.t_begin, ntiles = tiles.ntiles;

  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sb = kc::smem_u32(smem);
  float* s_S = reinterpret_cast<float*>(smem + sh.off_s);
  int* s_slot = reinterpret_cast<int*>(smem + sh.off_slot);
  float* s_alpha = reinterpret_cast<float*>(smem + sh.off_stat);
  float* s_m = s_alpha + HG;
  float* s_l = s_m + HG;

  // ---- prologue: Q (its own cp.async group), then the first stages of the gather ring ----
  issue_q_tile<H, HG, D>(p, sb + sh.off_q, token, h0, tid, NT);
  // The top-k entries of a tile reach smem one gather ahead (cp.async), so issuing a gather never waits on a
  // global load: entries of tile j land with the gather of tile j - PRO (the first PRO tiles with Q).
  constexpr int PRO = ST >= 2 ? ST - 1 : 1, NIDX = sh.idx_buffers;
  const int* idx = p.indices + (long long)token * TOPK;
  int* s_idx = reinterpret_cast<int*>(smem + sh.off_idx);
  auto fetch_idx = [&](int j) {  // entries of local tile j (if it exists) into s_idx[j % NIDX]
    if (tid < TN && j < ntiles) {
      const int pos = (t_begin + j) * TN + tid;
      cp_async_4(sb + sh.off_idx + ((j % NIDX) * TN + tid) * 4, pos < TOPK ? idx + pos : idx, pos < TOPK ? 4 : 0);
    }
  };
  for (int j = 0; j < PRO; ++j) fetch_idx(j);
  kc::cp_async_commit();
  kc::cp_async_wait<0>();
  __syncthreads();

  const char* kvb = static_cast<const char*>(p.kv_cache);
  auto load_tile = [&](int j) {
    const int buf = j % ST;
    const int pos0 = (t_begin + j) * TN;
    const unsigned dst0 = FP8 ? sb + sh.off_raw + buf * RAW_TILE : sb + sh.off_kv + buf * sh.kv_tile_bytes;
    const int* tidx = s_idx + (j % NIDX) * TN;
    auto slot_of = [&](int r, bool report) {  // the tile row's cache slot, or -1 (skip)
      const int pos = pos0 + r;
      const int slot = pos < TOPK ? tidx[r] : -1;
      bool valid = slot >= 0;
      if constexpr (S::kChecked) {
        if (slot != -1 && report)
          valid = kc::check_index(p.report, kc::kCheckTopkIndex, (unsigned)token, slot, p.num_slots);
        else if (slot != -1)
          valid = slot >= 0 && slot < p.num_slots;
      }
      return valid ? slot : -1;
    };
    for (int i = tid; i < TN * RCH; i += NT) {
      const int r = i / RCH, c = i - (i / RCH) * RCH;
      const int slot = slot_of(r, false);
      const unsigned dst = FP8 ? dst0 + (r * RCH + c) * 16 : dst0 + tile_off(TN, r, c);
      const char* src = slot >= 0 ? kvb + (long long)slot * RB + c * 16 : kvb;
      kc::cp_async_16(dst, src, slot >= 0 ? 16 : 0);
    }
    for (int r = tid; r < TN; r += NT) s_slot[(j % SB) * TN + r] = slot_of(r, true);
    fetch_idx(j + PRO);  // same commit group as this gather
  };
  // ST >= 2: a ring of ST raw tiles, ST - 1 in flight. ST == 1 (fp8 only): one raw tile, reloaded as soon as
  // it has been dequantized, so the gather of tile j+1 overlaps the MMAs of tile j.
#pragma unroll
  for (int j = 0; j < PRO; ++j) {
    if (j < ntiles) load_tile(j);
    kc::cp_async_commit();
  }

  float o[OMT][ONO][4];
#pragma unroll
  for (int mt = 0; mt < OMT; ++mt)
#pragma unroll
    for (int n = 0; n < ONO; ++n) o[mt][n][0] = o[mt][n][1] = o[mt][n][2] = o[mt][n][3] = 0.f;
  float m_run = kc::neg_inf(), l_run = 0.f;  // the softmax row of this thread (tid / TPR)
  float m_run2[2] = {kc::neg_inf(), kc::neg_inf()}, l_run2[2] = {0.f, 0.f};  // WGPV: rows orow0 + g (+ 8)
  const float scale_log2 = p.softmax_scale * kc::kLog2e;
  const int wm = warp % WM, wn = warp / WM;
  const int c0w = warp * CPW;
  const int orow0 = WGPV ? 16 * (warp & 3) : 0;               // first O row (head) of this warp
  const int ocol0 = WGPV ? (LAT / NWG) * (warp >> 2) : c0w;  // first O column of this warp

  for (int it = 0; it < ntiles; ++it) {
    if constexpr (ST >= 2) {
      kc::cp_async_wait<ST - 2>();
      __syncthreads();
      if (it + ST - 1 < ntiles) load_tile(it + ST - 1);
      kc::cp_async_commit();
    } else {
      kc::cp_async_wait<0>();
      __syncthreads();
    }
    const int buf = it % ST, sbuf = it % SB;
    if constexpr (S::kWgmma && !FP8) {  // the bf16 tile (and Q) landed through cp.async: publish to wgmma
      kc::fence_proxy_async();
      __syncthreads();
    }

    unsigned sK;
    if constexpr (FP8) {
      const unsigned char* raw = smem + sh.off_raw + buf * RAW_TILE;
      dequant_tile<LAT, S::kRope, TN, RB, NT, 1>(raw, smem + sh.off_kv, tid);
      if constexpr (S::kWgmma) kc::fence_proxy_async();
      __syncthreads();
      if constexpr (ST == 1) {
        if (it + 1 < ntiles) load_tile(it + 1);
        kc::cp_async_commit();
      }
      sK = sb + sh.off_kv;
    } else {
      sK = sb + sh.off_kv + buf * sh.kv_tile_bytes;
    }

    float alpha[2] = {1.f, 1.f};  // (WGPV) this thread's O rows' rescale factors
    if constexpr (WGPV) {
      // ---- S = Q K^T in registers, online softmax on them, P to smem ----
      float d[TN / NWG / 2];
      qk_wgmma_regs<HG, TN, TN / NWG, D>(d, sb + sh.off_q, sK, warp >> 2);
      softmax_regs<HG, TN, TN / NWG, NWG>(d, s_slot + sbuf * TN, warp >> 2, orow0 + g, t4, scale_log2, m_run2,
                                          l_run2, alpha, s_S, smem + sh.off_p);
      kc::fence_proxy_async();  // P is read by wgmma (async proxy)
      __syncthreads();
    } else {
      // ---- S = Q K^T (fp32 scores to smem) ----
      if constexpr (S::kWgmma) {
        // one warpgroup per N = TN / (warps / 4) tokens, all 64 heads, K = 576 in 36 steps of 16
        constexpr int NWG = sh.threads / 128;
        qk_wgmma<HG, TN, TN / NWG, D>(sb + sh.off_q, sK, warp >> 2, warp & 3, lane, s_S, SS);
      } else if (warp < sh.s_warps) {
        // Small score tiles (16-head groups: one 16x8 tile per warp) are a chain of 36 dependent mma.sync; the odd
        // k steps go to a second accumulator to halve it, added at the end.
        constexpr bool TWO = MTW * NTW <= 2;
        float sacc[MTW][NTW][4], sacc2[MTW][NTW][4];
#pragma unroll
        for (int j = 0; j < MTW; ++j)
#pragma unroll
          for (int n = 0; n < NTW; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) sacc[j][n][e] = sacc2[j][n][e] = 0.f;
#pragma unroll 4
        for (int kp = 0; kp < D / 32; ++kp) {
          unsigned a[MTW][2][4];
#pragma unroll
          for (int j = 0; j < MTW; ++j)
#pragma unroll
            for (int hk = 0; hk < 2; ++hk) {
              const int row = (wm * MTW + j) * 16 + (lm & 1) * 8 + lr, ch = 2 * (2 * kp + hk) + (lm >> 1);
              kc::ldmatrix_x4(a[j][hk], sb + sh.off_q + tile_off(HG, row, ch));
            }
#pragma unroll
          for (int n = 0; n < NTW; ++n) {
            unsigned bf[4];
            const int row = (wn * NTW + n) * 8 + lr, ch = 4 * kp + lm;
            kc::ldmatrix_x4(bf, sK + tile_off(TN, row, ch));
#pragma unroll
            for (int j = 0; j < MTW; ++j) {
              kc::mma_16816<true>(sacc[j][n], a[j][0], bf[0], bf[1]);
              kc::mma_16816<true>(TWO ? sacc2[j][n] : sacc[j][n], a[j][1], bf[2], bf[3]);
            }
          }
        }
        if constexpr (TWO) {
#pragma unroll
          for (int j = 0; j < MTW; ++j)
#pragma unroll
            for (int n = 0; n < NTW; ++n)
#pragma unroll
              for (int e = 0; e < 4; ++e) sacc[j][n][e] += sacc2[j][n][e];
        }
#pragma unroll
        for (int j = 0; j < MTW; ++j)
#pragma unroll
          for (int n = 0; n < NTW; ++n) {
            const int r0 = (wm * MTW + j) * 16 + g, col = (wn * NTW + n) * 8 + 2 * t4;
            *reinterpret_cast<float2*>(s_S + r0 * SS + col) = make_float2(sacc[j][n][0], sacc[j][n][1]);
            *reinterpret_cast<float2*>(s_S + (r0 + 8) * SS + col) = make_float2(sacc[j][n][2], sacc[j][n][3]);
          }
      }
      __syncthreads();

      // ---- online softmax: TPR threads per head row ----
      softmax_tile<TN, TPR>(tid, s_S, SS, s_slot + sbuf * TN, scale_log2, m_run, l_run, s_alpha, smem + sh.off_p);
      __syncthreads();
    }

    // ---- O = O * alpha + P V (this warp's output columns, every head of the CTA) ----
#pragma unroll
    for (int mt = 0; mt < OMT; ++mt) {
      const float a0 = WGPV ? alpha[0] : s_alpha[orow0 + mt * 16 + g];
      const float a1 = WGPV ? alpha[1] : s_alpha[orow0 + mt * 16 + g + 8];
#pragma unroll
      for (int n = 0; n < ONO; ++n) {
        o[mt][n][0] *= a0;
        o[mt][n][1] *= a0;
        o[mt][n][2] *= a1;
        o[mt][n][3] *= a1;
      }
    }
    if constexpr (WGPV) {
      pv_wgmma<TN, LAT / NWG>(o, sb + sh.off_p, sK, ocol0);
    } else {
#pragma unroll
      for (int kk = 0; kk < TN / 16; ++kk) {
        unsigned pa[MT][4];
#pragma unroll
        for (int mt = 0; mt < MT; ++mt) {
          const int row = mt * 16 + (lm & 1) * 8 + lr, ch = 2 * kk + (lm >> 1);
          kc::ldmatrix_x4(pa[mt], sb + sh.off_p + (row * PCH + swzp<PCH>(row, ch)) * 16);
        }
#pragma unroll
        for (int nq = 0; nq < ONT / 2; ++nq) {
          unsigned v[4];
          const int row = kk * 16 + (lm & 1) * 8 + lr, ch = c0w / 8 + 2 * nq + (lm >> 1);
          kc::ldmatrix_x4_trans(v, sK + tile_off(TN, row, ch));
#pragma unroll
          for (int mt = 0; mt < MT; ++mt) {
            kc::mma_16816<true>(o[mt][2 * nq], pa[mt], v[0], v[1]);
            kc::mma_16816<true>(o[mt][2 * nq + 1], pa[mt], v[2], v[3]);
          }
        }
      }
    }
  }
  kc::cp_async_wait<0>();
  if constexpr (WGPV) {  // rows' max from warpgroup 0; sums added over the warpgroups (each has its columns)
    float* s_lpart = s_S;
    if (t4 == 0) {
      s_lpart[(warp >> 2) * HG + orow0 + g] = l_run2[0];
      s_lpart[(warp >> 2) * HG + orow0 + g + 8] = l_run2[1];
      if (warp < 4) {
        s_m[orow0 + g] = m_run2[0];
        s_m[orow0 + g + 8] = m_run2[1];
      }
    }
    __syncthreads();
    if (tid < HG) {
      float l = 0.f;
      for (int w = 0; w < NWG; ++w) l += s_lpart[w * HG + tid];
      s_l[tid] = l;
    }
  } else if (tid % TPR == 0) {
    s_m[tid / TPR] = m_run;
    s_l[tid / TPR] = l_run;
  }
  __syncthreads();

  kc::pdl_launch_dependents();  // the rows are consumed: the next kernel may take the SMs this grid frees
  write_output<S>(p, o, s_m, s_l, h0, token, split, orow0, ocol0, g, t4, tid);
}

template <class S>
__global__ void __launch_bounds__(Traits<S>::sh.threads, Traits<S>::sh.min_blocks)
    decode_kernel(const __grid_constant__ Params p) {
  kc::pdl_wait();  // every input may be written by the kernel before this one on the stream
  decode_body<S>(p);
}

// Merges the split partials of one (token, head) row per CTA: grid (num_heads, num_tokens), 128 threads, each
// owning LAT / 128 consecutive columns. The partials sit in L2 (the decode kernel just wrote them), so the merge
// is bound by load latency: each thread issues the loads of kSplitBatch splits (one vector load per split) before
// it merges any of them, in split order, so the sums are the same as one split at a time.
template <int N>
KT_DEV void load_partial(const float* src, float (&dst)[N]) {
  if constexpr (N == 4) {
    const float4 v = *reinterpret_cast<const float4*>(src);  // 16-byte aligned: LAT / 128 = 4 floats per thread
    dst[0] = v.x, dst[1] = v.y, dst[2] = v.z, dst[3] = v.w;
  } else if constexpr (N == 2) {
    const float2 v = *reinterpret_cast<const float2*>(src);
    dst[0] = v.x, dst[1] = v.y;
  } else {
#pragma unroll
    for (int i = 0; i < N; ++i) dst[i] = src[i];
  }
}

template <class S>
__global__ void __launch_bounds__(128) combine_kernel(const __grid_constant__ Params p) {
  constexpr int LAT = S::kLat, H = S::kNumHeads, VPT = LAT / 128, kSplitBatch = 8;
  const int head = blockIdx.x, token = blockIdx.y, tid = threadIdx.x;
  kc::pdl_wait();  // the partials of the decode kernel before it
  const int ns = p.num_splits;
  const long long row = (long long)token * H + head;
  const float* ml = p.workspace + (long long)p.num_tokens * H * ns * LAT + row * ns * 2;
  const float* po = p.workspace + row * ns * LAT + tid * VPT;
  float M = kc::neg_inf();
#pragma unroll 8
  for (int s = 0; s < ns; ++s) M = fmaxf(M, ml[2 * s]);
  float L = 0.f, acc[VPT];
#pragma unroll
  for (int v = 0; v < VPT; ++v) acc[v] = 0.f;
#pragma unroll 1
  for (int s0 = 0; s0 < ns; s0 += kSplitBatch) {
    float x[kSplitBatch][VPT];
#pragma unroll
    for (int u = 0; u < kSplitBatch; ++u)
      if (s0 + u < ns) load_partial(po + (long long)(s0 + u) * LAT, x[u]);
#pragma unroll
    for (int u = 0; u < kSplitBatch; ++u) {
      if (s0 + u >= ns) break;
      const float w = kc::merge_weight(ml[2 * (s0 + u)], M);
      L += w * ml[2 * (s0 + u) + 1];
#pragma unroll
      for (int v = 0; v < VPT; ++v) acc[v] += w * x[u][v];
    }
  }
  const kc::RowFinal f =
      kc::finalize_row(M, L, p.sinks != nullptr, p.sinks != nullptr ? p.sinks[head] : 0.f, 1.f);
  unsigned short* orow = static_cast<unsigned short*>(p.out) + row * LAT + tid * VPT;
  if constexpr (VPT % 2 == 0) {  // two values per 4-byte store (out is 4-byte aligned): half the stores
#pragma unroll
    for (int v = 0; v < VPT; v += 2)
      *reinterpret_cast<unsigned*>(orow + v) = kc::pack_bf16x2(acc[v] * f.scale, acc[v + 1] * f.scale);
  } else {
#pragma unroll
    for (int v = 0; v < VPT; ++v) orow[v] = kc::float_to_bf16(acc[v] * f.scale);
  }
  if (tid == 0 && p.lse != nullptr) p.lse[row] = f.lse;
}

}  // namespace ktune_mla
