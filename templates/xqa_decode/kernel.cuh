// xqa_decode: paged-KV decode attention (GQA, spec-decode q_len 1..64, masks, sinks, window, softcap, split-KV).
//
// One CTA per (split, kv head [x row group], request). The CTA's query rows are every (query token, q head) of
// its kv head: row r = q_index * group + head_in_group. They form the M dimension of mma.sync m16n8k16, so each
// KV byte is read once for all of them. KV tiles of kTokensPerTile tokens stream through a kStages-deep cp.async
// ring (16-byte loads, XOR-swizzled rows, page indices prefetched one iteration ahead through smem). Warps split
// a tile's tokens (warps_n) and/or the row tiles (warps_m); each keeps its own online softmax (fp32, base 2,
// log2(e) folded into the scale) and the warps are merged in the epilogue through smem.
// FP8 e4m3 KV: K and V are converted to fp16 in registers after ldmatrix (hardware cvt on sm_89+, an exact
// bit trick giving value * 2^-8 on sm_80/86 with the 2^8 folded into the scales); compute is fp16 then and Q
// is converted to fp16.
// For K the e4m3 bytes are consumed in a permuted k order (Q is permuted identically when staged in smem);
// for V, ldmatrix.trans on byte pairs gives even and odd head-dim columns that become separate n tiles.
// num_splits > 1: fp32 partial O (unnormalized) + (max, sum) go to the workspace; combine_kernel merges.
//
// Hopper (sm_90a, Spec::kWgmma, config suffix .wg): for a CTA of 64 or 128 query rows (max_q_len * group of
// 49..64 or 113..128, or .m4 / .m8) and 16-bit KV, a warpgroup per 64 rows runs both products on wgmma with its
// operands in shared memory (the warpgroups of a CTA share each K/V tile):
// S = Q K^T (m64 x tile x k16, Q and K K-major) and O += P V (P from the S accumulators in registers, V read
// MN-major, m64 x head_dim x k16). K/V tiles and Q are then stored in the wgmma 128-byte-swizzle layout (64-column
// blocks, 8-row atoms of 1024 bytes); the cp.async ring, masks, softmax and epilogue are the mma.sync path's.
// Each KV byte then feeds 4x (64 rows) or 8x (128 rows) the MMAs of a 16-row CTA (q1-q4 at group 4) through a few
// wide asynchronous instructions instead of chains of m16n8k16 with ldmatrix fragments in registers.
// Other arches and shapes: mma.sync m16n8k16 + cp.async.
#pragma once

#include "common/dtype.h"
#include "common/numerics.cuh"
#include "common/mma.cuh"
#include "common/async_copy.cuh"
#include "common/mask.cuh"
#include "common/pdl.cuh"
#include "common/softmax.cuh"
#include "common/wgmma.cuh"
#include "xqa_decode/params.h"
#include "xqa_decode/shape.h"

namespace ktune_xqa {

namespace kc = ::ktune_common;

// What the problem alone fixes: all the combine reads, so the shared module's Spec (no tile config) instantiates it.
template <class S>
struct ProblemTraits {
  static constexpr bool kKV8 = S::kKVType == kc::kE4M3;
  static constexpr float kFold = kKV8 ? kc::kE4m3Fold : 1.f;  // e4m3 -> f16 conversion scale (K and V)
  static constexpr int kNumQHeads = S::kNumKvHeads * S::kGroupSize;
};

template <class S>
struct Traits : ProblemTraits<S> {
  static constexpr int kMTilesCfg = S::kMTilesPerCta;
  static constexpr Shape sh = make_shape(S::kHeadDim, S::kGroupSize, S::kMaxQLen, S::kPageSize, S::kKVType,
                                         S::kTokensPerTile, S::kStages, S::kWarps, kMTilesCfg, S::kWgmma);
  static constexpr int kThreads = sh.threads;
  static constexpr int kMinBlocks = sh.min_blocks;
  static constexpr bool kBF = S::kKVType == kc::kBF16;  // mma type: bf16 for bf16 KV, else fp16
  static_assert(shape_error(sh) == nullptr, "invalid xqa_decode shape (see shape_error)");
  static_assert(S::kMaxQLen >= 1 && S::kMaxQLen <= 64, "kMaxQLen must be 1..64");
  static constexpr int kMaskWords = kc::draft_mask_words(S::kMaxQLen);  // explicit mask: words per query row
};

// Row finalization (sinks, normalization, LSE) is the shared one (common/softmax.cuh), as on the host.
using kc::RowFinal;
using kc::finalize_row;

// Stores 4 consecutive output values (16-bit: 8 bytes, e4m3: 4 bytes).
template <int kOut>
__device__ __forceinline__ void store4(void* out, long long off, float a, float b, float c, float d) {
  if constexpr (kOut == kc::kBF16) {
    uint2 v = make_uint2(kc::pack_bf16x2(a, b), kc::pack_bf16x2(c, d));
    *reinterpret_cast<uint2*>(static_cast<unsigned short*>(out) + off) = v;
  } else if constexpr (kOut == kc::kFP16) {
    uint2 v = make_uint2(kc::pack_f16x2(a, b), kc::pack_f16x2(c, d));
    *reinterpret_cast<uint2*>(static_cast<unsigned short*>(out) + off) = v;
  } else {
    *reinterpret_cast<unsigned*>(static_cast<unsigned char*>(out) + off) = kc::pack_e4m3x4(a, b, c, d);
  }
}

// Request b's geometry; in a checked kernel with ragged offsets, also checked against num_tokens: a request whose
// rows [q_start, q_start + n) leave [0, num_tokens) (q_cu_seq_lens in device memory, which the host cannot read)
// is reported and gets no rows, so nothing past q or out is read or written for it. Every thread of a CTA reads
// the same entries and takes the same path.
template <class S>
__device__ __forceinline__ Request checked_request(const Params& p, int b) {
  Request rq = load_request(p, b, S::kMaxQLen);
  if constexpr (S::kChecked) {
    if (p.q_cu_seq_lens && rq.n > 0) {
      const long long limit = (long long)p.num_tokens + 1;  // an offset may equal num_tokens
      if (!kc::check_index(p.report, kc::kCheckQueryOffset, b, rq.q_start, limit) ||
          !kc::check_index(p.report, kc::kCheckQueryOffset, b, p.q_cu_seq_lens[b + 1], limit))
        rq.n = 0;
    }
  }
  return rq;
}

template <int kChunks>
__device__ __forceinline__ int swz(int row, int ch) {
  if constexpr (kChunks >= 8) return ch ^ (row & 7);
  else return ch ^ ((row >> 1) & 3);
}
// The wg path's byte offset of 16-byte chunk ch of row `row` in a tile of kRows rows: 64-element column blocks
// of kRows x 128 bytes, chunk c of row r at c ^ (r % 8) within its 128 bytes (wgmma's 128-byte swizzle).
template <int kRows>
__device__ __forceinline__ int wg_off(int row, int ch) {
  return ((ch >> 3) * kRows + row) * 128 + (((ch & 7) ^ (row & 7)) << 4);
}

template <class S>
__global__ void __launch_bounds__(Traits<S>::kThreads, Traits<S>::kMinBlocks)
    decode_kernel(const __grid_constant__ Params p) {
  using Tr = Traits<S>;
  constexpr Shape sh = Tr::sh;
  constexpr int D = S::kHeadDim, G = S::kGroupSize, QL = S::kMaxQLen, PS = S::kPageSize;
  constexpr int TT = S::kTokensPerTile, ST = S::kStages, HKV = S::kNumKvHeads, HQ = Tr::kNumQHeads;
  constexpr bool kKV8 = Tr::kKV8, kBF = Tr::kBF, kWG = S::kWgmma;
  constexpr int WM = sh.warps_m, MTW = sh.mt_per_warp, TPW = sh.tok_per_warp, NT = TPW / 8;
  constexpr int CPR = sh.kv_chunks, NTHR = sh.threads, PPT = sh.pages_per_tile, CMT = sh.cta_m_tiles;
  constexpr int CROWS = sh.cta_rows, WN = sh.warps_n, ODN = D / 8;
  constexpr int ES = kc::dtype_size(S::kKVType);
  constexpr long long kPageElems = 2LL * HKV * PS * D;          // the combined cache's defaults (params.h)
  constexpr long long kVOffBytes = (long long)HKV * PS * D * ES;
  constexpr int kTileBytes = TT * D * ES;  // one K (or V) tile in smem
  constexpr bool kQRegs = sh.q_in_regs;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int wm = warp % WM, wn = warp / WM;
  const int g = lane >> 2, t4 = lane & 3, lr = lane & 7, lm = lane >> 3;
  const int b = blockIdx.z, split = blockIdx.x;
  const int kvh = blockIdx.y / sh.m_groups, mg = blockIdx.y % sh.m_groups;

  kc::pdl_wait();  // every input may be written by the kernel before this one on the stream
  const Request rq = checked_request<S>(p, b);
  const int n = rq.n, L = rq.L, q_start = rq.q_start;
  if (n <= 0 || L <= 0) return;                  // CUDA-graph padding: read nothing, write nothing
  if (mg * CROWS >= n * G) return;               // this row group holds no live query row
  const Scales scl = load_scales(p);
  const long long q_st = p.q_stride_token ? p.q_stride_token : (long long)HQ * D;
  const long long q_sh = p.q_stride_head ? p.q_stride_head : (long long)D;

  const bool win = S::kSlidingWindow && p.window_left >= 0;
  const int wl = p.window_left;
  const int kv_lo = win ? max(0, L - n - wl) : 0;
  const int tile_lo = kv_lo / TT, tile_hi = (L + TT - 1) / TT;
  const int per_split = (tile_hi - tile_lo + p.num_splits - 1) / p.num_splits;
  const int t_begin = tile_lo + split * per_split;
  const int ntiles = max(0, min(tile_hi, t_begin + per_split) - t_begin);
  const int draft0 = L - n;  // first draft key

  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned s_base = kc::smem_u32(smem);
  int* s_pages = reinterpret_cast<int*>(smem + sh.off_pages);
  float* s_stat = reinterpret_cast<float*>(smem + sh.off_stats);

  const int max_entry = (L + PS - 1) / PS;
  const int* bt = p.block_tables + (long long)b * p.max_pages_per_req;
  if (S::kChecked && (long long)L > (long long)p.max_pages_per_req * PS) {
    // seq_len needs more block-table entries than a row holds: report, and read nothing for this request. (Compared
    // in 64 bits: max_entry's L + PS - 1 wraps for a seq_len within a page of 2^31, which would pass the check.)
    kc::report_bad_index(p.report, kc::kCheckSeqLen, b, L, (long long)p.max_pages_per_req * PS + 1);
    return;
  }
  auto page_entry = [&](int tile_abs, int slot) -> int {
    int e = (tile_abs * TT) / PS + slot;
    if (e >= max_entry) return 0;
    const int page = __ldg(bt + e);
    if (S::kChecked && !kc::check_index(p.report, kc::kCheckPageIndex, b, page, p.num_pages)) return 0;
    return page;
  };

  // ---- prologue: page indices of the first tiles, Q into smem, first KV loads ----
  for (int i = tid; i < ST * PPT; i += NTHR) {
    int j = i / PPT;
    if (j < ntiles) s_pages[i] = page_entry(t_begin + j, i % PPT);
  }
  // Q: each thread's pairs of values, kQBatch pairs' loads issued before any of their stores (a shared-memory
  // store through a generic pointer between two loads keeps the compiler from moving the second load above it, so
  // one pair per store would wait one memory latency per pair).
  constexpr int kQPairs = CROWS * (D / 2), kQIters = (kQPairs + NTHR - 1) / NTHR;
  constexpr int kQBatch = kQIters < 8 ? kQIters : 8;
  // Every (thread, iteration) of every batch holds a pair: no bounds test in the loops.
  constexpr bool kWholeBatches = kQPairs % NTHR == 0 && kQIters % kQBatch == 0;
#pragma unroll 1
  for (int u0 = 0; u0 < kQIters; u0 += kQBatch) {
    float qv[kQBatch][2];
#pragma unroll
    for (int u = 0; u < kQBatch; ++u) {
      const int i = tid + (u0 + u) * NTHR;
      const int r = i / (D / 2), c = (i % (D / 2)) * 2;
      const int rg = mg * CROWS + r, qi = rg / G, gh = rg % G;
      const bool ok = (kWholeBatches || i < kQPairs) && rg < sh.rows && qi < n;
      const long long off = (long long)(q_start + qi) * q_st + (long long)(kvh * G + gh) * q_sh + c;
      qv[u][0] = ok ? kc::to_float(S::kQType, p.q, off) : 0.f;
      qv[u][1] = ok ? kc::to_float(S::kQType, p.q, off + 1) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kQBatch; ++u) {
      const int i = tid + (u0 + u) * NTHR;
      if (!kWholeBatches && i >= kQPairs) continue;
      const int r = i / (D / 2), c = (i % (D / 2)) * 2;
      float v0 = qv[u][0], v1 = qv[u][1];
      if (!kBF) {  // fp16 mma: keep bf16 / large values finite
        v0 = fminf(fmaxf(v0, -65504.f), 65504.f);
        v1 = fminf(fmaxf(v1, -65504.f), 65504.f);
      }
      int cs = c;
      if (kKV8) {  // permuted k order matching the e4m3 K fragments: col 4t+i -> 2t+i, 4t+2+i -> 8+2t+i
        const int cb = c & 15;
        cs = (c & ~15) | ((cb & 2) ? 8 : 0) | ((cb >> 2) * 2);
      }
      const int ch = cs >> 3;
      const int qoff = kWG ? wg_off<CROWS>(r, ch) : (r * (D / 8) + (ch ^ (r & 7))) * 16;
      *reinterpret_cast<unsigned*>(smem + sh.off_q + qoff + (cs & 7) * 2) = kc::pack_x2<kBF>(v0, v1);
    }
  }
  if constexpr (kWG) kc::fence_proxy_async();  // Q is read by wgmma
  __syncthreads();

  const char* kv_base = static_cast<const char*>(p.kv_cache);
  const long long page_bytes = (p.kv_page_stride ? p.kv_page_stride : kPageElems) * ES;
  const long long v_off = p.kv_v_offset ? p.kv_v_offset : kVOffBytes;  // V row = K row + v_off (may be < 0)
  // Thread -> (row0 + it * RPI, chunk) of a tile: RPI rows per pass, 16-byte chunks coalesced along each row.
  constexpr int RPI = NTHR / CPR;
  constexpr long long kRowStride = (S::kLayoutHND ? (long long)D : (long long)HKV * D) * ES;  // next token in a page
  const int ld_row0 = tid / CPR, ld_ch = tid % CPR;
  const long long head_off = (S::kLayoutHND ? (long long)kvh * PS * D : (long long)kvh * D) * ES + ld_ch * 16;
  // Pass `it` loads row ld_row0 + it * RPI of the tile (ld_row0 < RPI). When RPI divides the page size (always
  // when a tile fits in a page), a pass's page slot and row within the page are compile-time offsets from the
  // thread's first row: each page's K and V addresses are formed once per tile and every pass adds an immediate; a pass
  // that spans pages (RPI > PS) looks its row's page up in the table. Rows past L load nothing (src-size 0);
  // their addresses stay inside the cache because page_entry maps block-table slots past the request to page 0.
  constexpr bool kPassInPage = TT <= PS || PS % RPI == 0;
  constexpr int kSlots = kPassInPage && TT > PS ? PPT : 1;
  auto load_tile = [&](int j) {
    const int stage = j % ST;
    const int tile_start = (t_begin + j) * TT;
    const unsigned dst0 = s_base + stage * sh.smem_stage;
    // kPassInPage: the K and V addresses of the thread's first row in each page of the tile
    const char* k_page[kSlots];
    const char* v_page[kSlots];
    if constexpr (kPassInPage) {
      const int first = (TT > PS ? 0 : tile_start % PS) + ld_row0;
#pragma unroll
      for (int slot = 0; slot < kSlots; ++slot) {
        k_page[slot] = kv_base + (long long)s_pages[stage * PPT + slot] * page_bytes + head_off + first * kRowStride;
        v_page[slot] = k_page[slot] + v_off;
      }
    }
#pragma unroll
    for (int it = 0; it < TT / RPI; ++it) {
      const int row = ld_row0 + it * RPI;
      const char* k;
      const char* v = nullptr;  // in-page passes; a pass that spans pages copies V from K + v_off
      if constexpr (kPassInPage) {
        const int slot = TT > PS ? (it * RPI) / PS : 0;
        const long long off = (long long)(TT > PS ? (it * RPI) % PS : it * RPI) * kRowStride;
        k = k_page[slot] + off;
        v = v_page[slot] + off;
      } else {
        k = kv_base + (long long)s_pages[stage * PPT + row / PS] * page_bytes + head_off + (row % PS) * kRowStride;
      }
      const int bytes = tile_start + row < L ? 16 : 0;
      const unsigned dst = dst0 + (kWG ? wg_off<TT>(row, ld_ch) : (row * CPR + swz<CPR>(row, ld_ch)) * 16);
      kc::cp_async_16(dst, k, bytes);
      kc::cp_async_16(dst + kTileBytes, kPassInPage ? v : k + v_off, bytes);
    }
  };
#pragma unroll
  for (int j = 0; j < ST - 1; ++j) {
    if (j < ntiles) load_tile(j);
    kc::cp_async_commit();
  }

  // ---- per-thread row data ----
  constexpr int MW = Tr::kMaskWords;
  int qrow[MTW][2];          // query index of the thread's rows (g, g+8) per m tile
  unsigned mword[MTW][2][MW];  // explicit mask words of those rows
#pragma unroll
  for (int j = 0; j < MTW; ++j)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int rg = mg * CROWS + (wm + j * WM) * 16 + g + 8 * h;
      const int qi = rg / G;
      qrow[j][h] = qi;
#pragma unroll
      for (int w = 0; w < MW; ++w) {
        mword[j][h][w] = 0u;
        if (S::kMask == 2 && rg < sh.rows && qi < n && (wm + j * WM) < CMT)
          mword[j][h][w] = kc::draft_mask_word(p.mask, q_start + qi, MW, w);
      }
    }

  constexpr int QF_MT = kQRegs ? MTW : 1, QF_KS = kQRegs ? D / 16 : 1;
  unsigned qf[QF_MT][QF_KS][4];
  auto q_frag = [&](int j, int ks, unsigned (&a)[4]) {
    const int row = (wm + j * WM) * 16 + (lm & 1) * 8 + lr, ch = 2 * ks + (lm >> 1);
    kc::ldmatrix_x4(a, s_base + sh.off_q + (row * (D / 8) + (ch ^ (row & 7))) * 16);
  };
  if constexpr (kQRegs) {
#pragma unroll
    for (int j = 0; j < MTW; ++j)
      if (wm + j * WM < CMT) {
#pragma unroll
        for (int ks = 0; ks < D / 16; ++ks) q_frag(j, ks, qf[j][ks]);
      }
  }

  float o[MTW][ODN][4];
  float mrow[MTW][2], lrow[MTW][2];
#pragma unroll
  for (int j = 0; j < MTW; ++j) {
#pragma unroll
    for (int dn = 0; dn < ODN; ++dn) o[j][dn][0] = o[j][dn][1] = o[j][dn][2] = o[j][dn][3] = 0.f;
    mrow[j][0] = mrow[j][1] = kc::neg_inf();
    lrow[j][0] = lrow[j][1] = 0.f;
  }

  const float scale_log2 = scl.bmm1 * Tr::kFold * kc::kLog2e;
  const bool use_cap = S::kSoftcap && p.softcap > 0.f;
  const float cap_pre = use_cap ? scl.bmm1 * Tr::kFold / p.softcap : 0.f;  // logit / cap
  const float cap_log2e = use_cap ? p.softcap * kc::kLog2e : 0.f;
  const int tok0 = wn * TPW;

  // ---- main loop ----
  for (int it = 0; it < ntiles; ++it) {
    const int pf_tile = it + ST;
    int pf = 0;
    if (tid < PPT && pf_tile < ntiles) pf = page_entry(t_begin + pf_tile, tid);
    kc::cp_async_wait<ST - 2>();
    if constexpr (kWG) kc::fence_proxy_async();  // this thread's copies of tile `it` are read by wgmma
    __syncthreads();
    if (it + ST - 1 < ntiles) load_tile(it + ST - 1);
    kc::cp_async_commit();

    const int stage = it % ST;
    const unsigned sK = s_base + stage * sh.smem_stage, sV = sK + kTileBytes;
    const int tile_start = (t_begin + it) * TT;

    float s[MTW][NT][4];
#pragma unroll
    for (int j = 0; j < MTW; ++j)
#pragma unroll
      for (int nt = 0; nt < NT; ++nt) s[j][nt][0] = s[j][nt][1] = s[j][nt][2] = s[j][nt][3] = 0.f;

    if constexpr (kWG) {  // S = Q K^T: one m64 x TT x k16 wgmma per k step, both operands in smem
      kc::wg_fence();
      const unsigned long long dq = kc::wg_desc_k128(s_base + sh.off_q + (warp >> 2) * 64 * 128),  // its 64 rows
                               dk = kc::wg_desc_k128(sK);
#pragma unroll
      for (int ks = 0; ks < D / 16; ++ks)
        kc::wgmma_ss<TT, kBF, false>(&s[0][0][0], dq + (unsigned)((((ks >> 2) * CROWS * 128) + (ks & 3) * 32) >> 4),
                                     dk + (unsigned)((((ks >> 2) * TT * 128) + (ks & 3) * 32) >> 4), ks != 0);
      kc::wg_commit();
      kc::wg_wait<0>();
      kc::wg_hold(*reinterpret_cast<float(*)[NT * 4]>(&s[0][0][0]));
    }
    // S = Q K^T. Each ldmatrix.x4 covers 2 n tiles x 2 smem chunks (bf16/fp16: one k step; e4m3: two).
#pragma unroll
    for (int kq = 0; kq < (kWG ? 0 : CPR / 2); ++kq) {
#pragma unroll
      for (int np = 0; np < NT / 2; ++np) {
        unsigned r[4];
        {
          const int row = tok0 + (2 * np + (lm >> 1)) * 8 + lr, ch = 2 * kq + (lm & 1);
          kc::ldmatrix_x4(r, sK + (row * CPR + swz<CPR>(row, ch)) * 16);
        }
#pragma unroll
        for (int j = 0; j < MTW; ++j) {
          if (wm + j * WM >= CMT) continue;
          if constexpr (!kKV8) {
            unsigned a[4];
            if constexpr (kQRegs) {
              a[0] = qf[j][kq][0]; a[1] = qf[j][kq][1]; a[2] = qf[j][kq][2]; a[3] = qf[j][kq][3];
            } else {
              q_frag(j, kq, a);
            }
            kc::mma_16816<kBF>(s[j][2 * np], a, r[0], r[1]);
            kc::mma_16816<kBF>(s[j][2 * np + 1], a, r[2], r[3]);
          } else {
#pragma unroll
            for (int hk = 0; hk < 2; ++hk) {
              const int ks = 2 * kq + hk;
              unsigned a[4];
              if constexpr (kQRegs) {
                a[0] = qf[j][ks][0]; a[1] = qf[j][ks][1]; a[2] = qf[j][ks][2]; a[3] = qf[j][ks][3];
              } else {
                q_frag(j, ks, a);
              }
              unsigned b0, b1, b2, b3;
              kc::e4m3x4_to_f16x2x2<false>(r[hk], b0, b1);
              kc::e4m3x4_to_f16x2x2<false>(r[2 + hk], b2, b3);
              kc::mma_16816<false>(s[j][2 * np], a, b0, b1);
              kc::mma_16816<false>(s[j][2 * np + 1], a, b2, b3);
            }
          }
        }
      }
    }

    // Online softmax on the fragments (rows g and g+8 of each m tile; the quad holds one row).
    const bool need_mask = (tile_start + TT > draft0) || (win && tile_start < L - 1 - wl);
#pragma unroll
    for (int j = 0; j < MTW; ++j) {
      if (wm + j * WM >= CMT) continue;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const float x = s[j][nt][2 * h + i];
            s[j][nt][2 * h + i] = (S::kSoftcap && use_cap) ? kc::softcap_log2(x * cap_pre, cap_log2e) : x * scale_log2;
          }
        // One uniform branch around the whole row's mask, each key's test a select: a branch per key would
        // split the row into basic blocks that the scheduler cannot interleave with the MMAs before it.
        if (need_mask) {
          const int qi = qrow[j][h];
#pragma unroll
          for (int nt = 0; nt < NT; ++nt)
#pragma unroll
            for (int i = 0; i < 2; ++i) {
              const int k = tile_start + tok0 + nt * 8 + 2 * t4 + i, jd = k - draft0;
              bool vis = k < L;
              if (S::kMask == 2) vis = vis && (jd < 0 || kc::draft_mask_bit<MW>(mword[j][h], jd));
              else vis = vis && jd <= qi;  // keys before the drafts (jd < 0) are visible to every query row
              if (win) vis = vis && k >= draft0 + qi - wl;
              s[j][nt][2 * h + i] = vis ? s[j][nt][2 * h + i] : kc::neg_inf();
            }
        }
        float mx = kc::neg_inf();
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 2; ++i) mx = fmaxf(mx, s[j][nt][2 * h + i]);
        mx = kc::quad_max(mx);
        const kc::MaxStep st = kc::online_max_step(mrow[j][h], fmaxf(mrow[j][h], mx));
        const float m_use = st.m_use, alpha = st.alpha;
        float sum = 0.f;
#pragma unroll
        for (int nt = 0; nt < NT; ++nt)
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const float pv = kc::fast_exp2(s[j][nt][2 * h + i] - m_use);
            s[j][nt][2 * h + i] = pv;
            sum += pv;
          }
        lrow[j][h] = lrow[j][h] * alpha + sum;
        if (__any_sync(0xffffffffu, alpha != 1.f)) {  // exact skip: once the maxima settle, most tiles
#pragma unroll
          for (int dn = 0; dn < ODN; ++dn) {
            o[j][dn][2 * h] *= alpha;
            o[j][dn][2 * h + 1] *= alpha;
          }
        }
      }
    }

    if constexpr (kWG) {  // O += P V: P from the S accumulators (registers), V MN-major from smem
      kc::wg_fence();
#pragma unroll
      for (int kk = 0; kk < TT / 16; ++kk) {
        unsigned pa[4];
        kc::acc_to_a_frag<kBF>(pa, &s[0][2 * kk][0]);
        kc::wgmma_rs<D, kBF, true>(&o[0][0][0], pa, kc::wg_desc_mn(sV + kk * 16 * 128, TT * 128, 1024), 1);
      }
      kc::wg_commit();
      kc::wg_wait<0>();  // the stage is refilled after the next barrier, and the softmax rescales o
      kc::wg_hold(*reinterpret_cast<float(*)[ODN * 4]>(&o[0][0][0]));
    }
    // O += P V. ldmatrix.x4.trans covers 16 tokens x 2 smem chunks.
#pragma unroll
    for (int kk = 0; kk < (kWG ? 0 : TPW / 16); ++kk) {
      unsigned pa[MTW][4];
#pragma unroll
      for (int j = 0; j < MTW; ++j) kc::acc_to_a_frag<kBF>(pa[j], &s[j][2 * kk][0]);
#pragma unroll
      for (int nq = 0; nq < CPR / 2; ++nq) {
        unsigned r[4];
        {
          const int row = tok0 + kk * 16 + (lm & 1) * 8 + lr, ch = 2 * nq + (lm >> 1);
          kc::ldmatrix_x4_trans(r, sV + (row * CPR + swz<CPR>(row, ch)) * 16);
        }
#pragma unroll
        for (int j = 0; j < MTW; ++j) {
          if (wm + j * WM >= CMT) continue;
          if constexpr (!kKV8) {
            kc::mma_16816<kBF>(o[j][2 * nq], pa[j], r[0], r[1]);
            kc::mma_16816<kBF>(o[j][2 * nq + 1], pa[j], r[2], r[3]);
          } else {
#pragma unroll
            for (int hc = 0; hc < 2; ++hc) {
              unsigned e0, o0, e1, o1;  // even / odd head-dim columns, tokens 0-7 and 8-15
              kc::e4m3x4_to_f16x2x2<true>(r[2 * hc], e0, o0);
              kc::e4m3x4_to_f16x2x2<true>(r[2 * hc + 1], e1, o1);
              kc::mma_16816<false>(o[j][4 * nq + 2 * hc], pa[j], e0, e1);
              kc::mma_16816<false>(o[j][4 * nq + 2 * hc + 1], pa[j], o0, o1);
            }
          }
        }
      }
    }

    if (tid < PPT && pf_tile < ntiles) s_pages[(pf_tile % ST) * PPT + tid] = pf;
  }
  kc::cp_async_wait<0>();
  __syncthreads();
  kc::pdl_launch_dependents();  // the KV stream is done: the next kernel may take the SMs this grid frees

  // ---- epilogue: merge the token-warps, normalize, store ----
#pragma unroll
  for (int j = 0; j < MTW; ++j) {
    const int mt = wm + j * WM;
    if (mt >= CMT) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float l = kc::quad_sum(lrow[j][h]);
      if (t4 == 0) {
        const int row = mt * 16 + g + 8 * h;
        s_stat[wn * CROWS + row] = mrow[j][h];
        s_stat[(WN + wn) * CROWS + row] = l;
      }
    }
  }
  __syncthreads();
  float* s_scale = s_stat + 2 * WN * CROWS;
  const bool direct = p.num_splits == 1;
  const long long o_st = p.out_stride_token ? p.out_stride_token : (long long)HQ * D;
  const long long o_sh = p.out_stride_head ? p.out_stride_head : (long long)D;
  const long long ws_rows = (long long)p.batch * QL * HQ;
  for (int r = tid; r < CROWS; r += NTHR) {
    float M = kc::neg_inf();
#pragma unroll
    for (int w = 0; w < WN; ++w) M = fmaxf(M, s_stat[w * CROWS + r]);
    float Lsum = 0.f;
#pragma unroll
    for (int w = 0; w < WN; ++w) {
      const float wt = kc::merge_weight(s_stat[w * CROWS + r], M);
      s_stat[w * CROWS + r] = wt;
      Lsum += wt * s_stat[(WN + w) * CROWS + r];
    }
    const int rg = mg * CROWS + r, qi = rg / G, hq = kvh * G + rg % G;
    float scale = 0.f;
    if (rg < sh.rows && qi < n) {
      if (direct) {
        const RowFinal f = finalize_row(M, Lsum, S::kSinks && p.sinks != nullptr,
                                        S::kSinks && p.sinks ? p.sinks[hq] : 0.f, scl.bmm2 * Tr::kFold);
        scale = f.scale;
        if (S::kWriteLse && p.lse) p.lse[(long long)(q_start + qi) * HQ + hq] = f.lse;
      } else {
        const long long rowid = (long long)(b * QL + qi) * HQ + hq;
        float* ml = p.workspace + ws_rows * p.num_splits * D + (rowid * p.num_splits + split) * 2;
        ml[0] = M;
        ml[1] = Lsum;
        scale = 1.f;
      }
    }
    s_scale[r] = scale;
  }
  __syncthreads();

  float* buf = reinterpret_cast<float*>(smem);  // aliases the (drained) KV ring
  constexpr int BS = 64 + 8;                    // row stride in floats
#pragma unroll
  for (int j = 0; j < MTW; ++j) {
#pragma unroll
    for (int dc = 0; dc < D / 64; ++dc) {
      const int mt = wm + j * WM;
      if (mt < CMT) {
        float* wb = buf + (wn * WM + wm) * 16 * BS;
#pragma unroll
        for (int q = 0; q < 8; ++q) {
          const int nt = dc * 8 + q;
#pragma unroll
          for (int i = 0; i < 2; ++i) {
            const int col = 2 * t4 + i;
            const int d = (kKV8 ? (nt >> 1) * 16 + 2 * col + (nt & 1) : nt * 8 + col) - dc * 64;
            wb[g * BS + d] = o[j][nt][i];
            wb[(g + 8) * BS + d] = o[j][nt][2 + i];
          }
        }
      }
      __syncthreads();
      for (int idx = tid; idx < WM * 16 * 16; idx += NTHR) {
        const int rr = idx >> 4, c4 = idx & 15, wmm = rr >> 4, r16 = rr & 15;
        const int mt2 = wmm + j * WM;
        if (mt2 >= CMT) continue;
        const int row = mt2 * 16 + r16, rg = mg * CROWS + row, qi = rg / G, hq = kvh * G + rg % G;
        if (rg >= sh.rows || qi >= n) continue;
        float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
        for (int w = 0; w < WN; ++w) {
          const float wt = s_stat[w * CROWS + row];
          const float4 v = *reinterpret_cast<const float4*>(buf + ((w * WM + wmm) * 16 + r16) * BS + c4 * 4);
          acc.x += wt * v.x;
          acc.y += wt * v.y;
          acc.z += wt * v.z;
          acc.w += wt * v.w;
        }
        const float sc = s_scale[row];
        acc.x *= sc;
        acc.y *= sc;
        acc.z *= sc;
        acc.w *= sc;
        const int d = dc * 64 + c4 * 4;
        if (direct) {
          store4<S::kOutType>(p.out, (long long)(q_start + qi) * o_st + (long long)hq * o_sh + d, acc.x, acc.y, acc.z,
                              acc.w);
        } else {
          const long long rowid = (long long)(b * QL + qi) * HQ + hq;
          *reinterpret_cast<float4*>(p.workspace + (rowid * p.num_splits + split) * D + d) = acc;
        }
      }
      __syncthreads();
    }
  }
}

// Merges the split-KV partials of one (query token, q head) row per CTA: grid (max_q_len * num_q_heads, batch),
// 128 threads. The four warps take every fourth split so that many independent loads are in flight (the merge
// is latency-bound: one row reads num_splits * (head_dim + 2) floats).
template <class S>
__global__ void __launch_bounds__(128) combine_kernel(const __grid_constant__ Params p) {
  using Tr = ProblemTraits<S>;
  constexpr int D = S::kHeadDim, QL = S::kMaxQLen, HQ = Tr::kNumQHeads, VPL = D / 32;
  const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
  const int row = blockIdx.x, b = blockIdx.y;
  const int qi = row / HQ, hq = row % HQ;
  kc::pdl_wait();  // the partials of the decode kernel before it
  const Request rq = checked_request<S>(p, b);
  if (rq.n <= 0 || rq.L <= 0 || qi >= rq.n) return;
  __shared__ float red[4];
  __shared__ __align__(16) float part[4][D];
  const int ns = p.num_splits;
  const long long rowid = (long long)(b * QL + qi) * HQ + hq;
  const float* ml = p.workspace + (long long)p.batch * QL * HQ * ns * D + rowid * ns * 2;
  const float* po = p.workspace + rowid * ns * D + lane * VPL;

  float m = kc::neg_inf();
  for (int s = tid; s < ns; s += 128) m = fmaxf(m, ml[2 * s]);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  if (lane == 0) red[warp] = m;
  __syncthreads();
  const float M = fmaxf(fmaxf(red[0], red[1]), fmaxf(red[2], red[3]));
  __syncthreads();
  float l = 0.f;
  for (int s = tid; s < ns; s += 128) l += kc::merge_weight(ml[2 * s], M) * ml[2 * s + 1];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) l += __shfl_xor_sync(0xffffffffu, l, o);
  if (lane == 0) red[warp] = l;

  // Every split of a live row wrote its partial (zeros when it had no tiles): no branch, loads overlap.
  float acc[VPL];
#pragma unroll
  for (int v = 0; v < VPL; ++v) acc[v] = 0.f;
#pragma unroll 4
  for (int s = warp; s < ns; s += 4) {
    const float w = kc::merge_weight(ml[2 * s], M);
#pragma unroll
    for (int v = 0; v < VPL; v += 2) {
      const float2 x = *reinterpret_cast<const float2*>(po + (long long)s * D + v);
      acc[v] += w * x.x;
      acc[v + 1] += w * x.y;
    }
  }
#pragma unroll
  for (int v = 0; v < VPL; ++v) part[warp][lane * VPL + v] = acc[v];
  __syncthreads();
  if (warp != 0) return;
  const float Lsum = red[0] + red[1] + red[2] + red[3];
#pragma unroll
  for (int v = 0; v < VPL; ++v) acc[v] = part[0][lane * VPL + v] + part[1][lane * VPL + v] + part[2][lane * VPL + v] +
                                         part[3][lane * VPL + v];
  const RowFinal f = finalize_row(M, Lsum, S::kSinks && p.sinks != nullptr, S::kSinks && p.sinks ? p.sinks[hq] : 0.f,
                                  load_scales(p).bmm2 * Tr::kFold);
  const long long o_st = p.out_stride_token ? p.out_stride_token : (long long)HQ * D;
  const long long o_sh = p.out_stride_head ? p.out_stride_head : (long long)D;
  const long long ob = (long long)(rq.q_start + qi) * o_st + (long long)hq * o_sh + lane * VPL;
  if constexpr (VPL >= 4) {
#pragma unroll
    for (int v = 0; v < VPL; v += 4)
      store4<S::kOutType>(p.out, ob + v, acc[v] * f.scale, acc[v + 1] * f.scale, acc[v + 2] * f.scale,
                          acc[v + 3] * f.scale);
  } else {  // D = 64: two values per lane
    const float a = acc[0] * f.scale, c = acc[1] * f.scale;
    if constexpr (S::kOutType == kc::kBF16) {
      *reinterpret_cast<unsigned*>(static_cast<unsigned short*>(p.out) + ob) = kc::pack_bf16x2(a, c);
    } else if constexpr (S::kOutType == kc::kFP16) {
      *reinterpret_cast<unsigned*>(static_cast<unsigned short*>(p.out) + ob) = kc::pack_f16x2(a, c);
    } else {
      *reinterpret_cast<unsigned short*>(static_cast<unsigned char*>(p.out) + ob) =
          (unsigned short)(kc::pack_e4m3x4(a, c, 0.f, 0.f) & 0xFFFFu);
    }
  }
  if (S::kWriteLse && p.lse && lane == 0) p.lse[(long long)(rq.q_start + qi) * HQ + hq] = f.lse;
}

}  // namespace ktune_xqa
