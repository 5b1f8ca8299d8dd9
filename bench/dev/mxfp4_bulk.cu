// Few-row MXFP4 W4A16 GEMM with the packed weight streamed by 1-D bulk async copies into a shared-memory ring
// (sm_90a), against the library's few-row kernel (templates/mxfp4_gemm/kernel.cuh), a pure read of the same bytes
// and cudaMemcpy D2D, on the decode shapes: dense N = K = 8192 at M = 1 and 16, and the gpt-oss gate_up grouped
// shape (E = 128, n = 5760, k = 2880, 1 or 4 rows per expert).
//
// Status: measured on the H200 (bench/results/2026-12-02-h200-mxfp4-bulk-ring.md): correct, and 1.4-1.8x slower
// than the library kernel. The lead it tests (more bytes in flight) is not what limits the library kernel; issue
// slots are (instructions per weight byte), and this kernel executes 23% more instructions than it. Kept as the
// record of that experiment and as a harness for the library kernel's few-row configs (the baselines below).
// ptxas (sm_90a, CUDA 13.0): bm8 86 registers, bm16 96 registers (cap 120 at 544 threads),
// 0 bytes stack, 0 spills; 1280 B static shared memory; dynamic 230,024 B (bm8, E = 128) / 226,320 B (bm16,
// dense) of the 232,448 B an SM can give one CTA.
//
// Build (from the repo root):
//   mkdir -p .devbuild && nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Itemplates -Ibench/dev \
//        -diag-suppress 128,1886 -Xptxas -v bench/dev/mxfp4_bulk.cu -o .devbuild/mxfp4_bulk
// Run: .devbuild/mxfp4_bulk            every shape: check against the library, then the timing table
//      .devbuild/mxfp4_bulk --small    small ragged dense and grouped cases, checks only (for compute-sanitizer)
//
// ---- The kernel (bulk::gemm) --------------------------------------------------------------------------------
// Same prepacked layout (params.h, layout version 1) and the same math as the library's s0 path: each lane's
// 16-byte weight fragment per (16 rows x 64 k) chunk, e2m1 -> bf16 by common/mxfp4.h's shifts + mask + one fma,
// m16n8k16 mma.sync with the weight as the A operand and the tokens as B, each 32-block accumulated on its own and
// scaled in fp32 by its e8m0 scale looked up in a 256-entry shared table. Only the fp32 summation order differs
// (chunks are split over warps and CTAs differently), so outputs match the library within fp32 accumulation-order
// noise before the bf16 rounding.
//
// CTA = 1 producer warp + kW = 16 consumer warps, one CTA per SM (persistent grid of min(#SMs, work) CTAs).
// A stage holds kSK = 8 consecutive 64-k chunks of kNT = 8 weight tiles (128 output columns): the weight
// (8 bulk copies of 8 x 512 B: for one chunk the 8 tiles are contiguous in the layout), their scale words (one
// copy per tile over the <= 3 four-chunk scale groups the chunks touch) and the stage's k range of the CTA's
// token rows (one copy per row, into rows padded to 16 B past 1 KB so ldmatrix is conflict-free).
//   stage bytes: weight 8*8*512 = 32768, scales 8*3*128 = 3072, activations bm * 1040 (bm8: 8320, bm16: 16640)
//   ring: bm8 5 stages (220,800 B), bm16 4 stages (209,920 B), + 2 reduction buffers (2 x 4 / 8 KB).
// Bytes in flight per SM: the producer refills a slot as soon as the 16 consumer warps have freed it, so when the
// memory is the limit every slot is in flight: bm8 5 x 35.8 KB = 179 KB, bm16 4 x 35.8 KB = 143 KB of weight +
// scales (+ the activation rows, from L2); when the consumers are the limit, one stage fewer (143 / 107 KB). The
// library's s0 configs hold at most 16 warps x 2 chunks x 4 tiles x 512 B = 64 KB, in registers.
// Consumer warp w takes chunk w % 8 of every stage for tiles 4 (w / 8) .. +3 of the 8: per stage it reads its 4
// weight fragments (ld.shared.v4), 4 scale words and its chunk's activation fragments (2 ldmatrix.x4 per 8-token
// tile), decodes and issues 16 mma per 8-token tile, then frees the slot (one mbarrier arrive per warp).
// mbarriers: full[s] (count 1: the producer's arrive.expect_tx, plus the stage's transaction bytes), empty[s]
// (count 16: one arrive per consumer warp). The producer ends the ring with a stage whose chunk count is 0.
//
// Work split (stream-K over chunks): the work is the list of (m tile, 128-column group, chunk) triples, chunk
// fastest, m tiles in expert order (grouped: an expert's rows in 8- or 16-row tiles, from expert_offsets on the
// device). CTA b takes the contiguous range [b T / G, (b+1) T / G) of the T triples, so every CTA streams the same
// number of weight chunks (+-1 chunk of 8 tiles) whatever E, n, k and the rows per expert are. A stage never crosses
// a (m tile, column group) boundary. When the CTA's range leaves a (m tile, column group), its 16 consumer warps add
// their partial sums into a shared fp32 tile (red.shared.add; two buffers, alternating, so one named barrier per
// flush suffices) and store: bf16 (+ bias) straight to C when this CTA covered the group's whole K range, else
// (the <= 2 groups at each end of the CTA's range) fp32 atomicAdd into a workspace [m][n]; the contributor that
// increments the group's counter last (the count of CTAs whose range meets the group is known from the split)
// reads the sums back with atomicExch(0), stores bf16 (+ bias) and resets the counter. The workspace and counters
// are therefore all zero again after every call: zeroed once at allocation, no memset or convert kernel per call.
// Grouped at gpt-oss shape: 128 x 45 x 45 = 259,200 triples, 1964 per CTA (~44 groups); dense N = K = 8192:
// 64 x 128 = 8192 triples, 62-63 per CTA, every group split over 2-3 CTAs (32 KB fp32 workspace at M = 1).
//
// Expected before the run: ~300-320 us (3.5-3.8 TB/s) grouped and ~13 / ~14 us dense, from ~55 ALU instructions
// per 512-byte chunk-tile; measured 680-707 us and 29 / 49 us (the results file has the Nsight Compute figures).
//
// ---- The harness ---------------------------------------------------------------------------------------------
// Baselines in the same process: the library kernel instantiated from its template with the configs the library
// picks (spec.cpp default_config): dense M = 1 bm8.tn4.wn1.wk16.s0.d2, M = 16 bm16.tn4.wn1.wk8.s3.d2, grouped
// <= 4 rows per expert bm8.tn4.wn2.wk1.s0.d2 (grouped_few_row_tiles), and bm8.tn2.wn1.wk8.s0.d2 as a second
// grouped tiling; a pure read of the packed weight + scales (16-byte streaming loads, folded into one word per
// thread); cudaMemcpy D2D of the same byte count. Timing: L2 flushed (256 MB written) before every call, CUDA
// events around the call alone, median of 25 calls. TB/s = packed weight + scale bytes / time; "x copy" = that
// rate over the D2D copy's read + write rate (the copy row shows its read rate in the TB/s column).
// Check: fresh random inputs (random codes, scales 2^-9..2^-2, N(0,1)-like bf16 activations, seed printed),
// outputs poisoned with NaN, the new kernel's bf16 output against the library's: max over elements of
// |new - lib| / max(|lib|, rms(lib)); exit 1 when it exceeds 1e-2 or any output is NaN.
#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "mxfp4_dev_harness.cuh"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/dtype.h"
#include "common/global_load.cuh"
#include "common/mma.cuh"
#include "common/mxfp4.h"
#include "common/numerics.cuh"
#include "mxfp4_dev_params.hpp"
#include "mxfp4_read_floor.cuh"
#include "mxfp4_gemm/kernel.cuh"

namespace kc = ::ktune_common;

namespace bulk {

// ---- PTX wrappers (sm_90): transaction mbarriers and the 1-D bulk copy
KT_DEV void bar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
KT_DEV void bar_arrive_tx(unsigned bar, unsigned bytes) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(bar), "r"(bytes)
               : "memory");
}
KT_DEV void bar_arrive(unsigned bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
}
KT_DEV void bar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{\n.reg .pred p;\nWAIT_%=:\nmbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n@!p bra WAIT_%=;\n}" ::"r"(bar),
      "r"(parity)
      : "memory");
}
// bytes (multiple of 16) from global src (16-byte aligned) to shared dst, completing on bar; policy: an L2 cache
// policy from createpolicy (the weight and scales are read once: evict_first).
KT_DEV void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar, unsigned long long policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(
          dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}
KT_DEV void bulk_copy(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
}
KT_DEV unsigned long long evict_first_policy() {
  unsigned long long pol;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
  return pol;
}
// Named barrier 1 over the consumer warps (the producer never joins it).
template <int kThreads>
KT_DEV void consumers_sync() {
  asm volatile("bar.sync 1, %0;" ::"n"(kThreads) : "memory");
}

template <int MT>
struct Geo {
  static constexpr int kBM = 8 * MT;                   // token rows per m tile
  static constexpr int kNT = 8;                        // 16-row weight tiles per column group (128 columns)
  static constexpr int kSK = 8;                        // 64-k chunks per stage
  static constexpr int kW = 16;                        // consumer warps
  static constexpr int kR = MT == 1 ? 5 : 4;           // ring stages
  static constexpr int kTPW = kNT * kSK / kW;          // weight tiles per consumer warp and stage (4)
  static constexpr int kSG = kSK / 4 + 1;              // scale groups a stage can touch (unaligned start)
  static constexpr int kWBytes = kSK * kNT * 512;      // [chunk][tile][32 lanes][16 B]
  static constexpr int kSBytes = kNT * kSG * 128;      // [tile][group][32 words]
  static constexpr int kArow = kSK * 128 + 16;         // padded activation row
  static constexpr int kABytes = kBM * kArow;
  static constexpr int kStage = kWBytes + kSBytes + kABytes;
  static constexpr int kRedFloats = kBM * kNT * 16;    // one reduction buffer: [row][128 columns]
  static constexpr int kThreads = 32 * (kW + 1);
  static constexpr int kFixedSmem = kR * kStage + 2 * kRedFloats * 4;
  static_assert(kStage % 128 == 0 || kStage % 16 == 0, "stage alignment");
  static_assert(kSK % 4 == 0 && kNT * kSK % kW == 0 && kW % kSK == 0, "warp mapping");
  // dynamic shared memory: ring, reduction buffers, then the (E + 1)-entry row-offset and tile-prefix tables
  static int smem_bytes(int experts) { return kFixedSmem + 2 * (experts + 1) * 4; }
};

struct Args {
  ktune_mxfp4::Params p;  // the library's parameters (same buffers, same layout)
  float* ws;              // fp32 [m][n] workspace, all zero between calls
  int* cnt;               // per (m tile, column group) arrival counters, all zero between calls
  int mtiles_max;         // counter rows: ceil(m / bm) + experts
};

constexpr int kFlagLast = 1 << 8, kFlagPartial = 1 << 9;

// Rows of m tile t: expert e (largest with tp[e] <= t), rows [m0, m1).
KT_DEV void tile_rows(const int* off, const int* tp, int experts, int bm, int t, int& e, int& m0, int& m1) {
  int lo = 0, hi = experts - 1;
  while (lo < hi) {  // largest e with tp[e] <= t (empty experts have tp[e] == tp[e + 1])
    const int mid = (lo + hi + 1) / 2;
    if (tp[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  e = lo;
  m0 = off[e] + (t - tp[e]) * bm;
  m1 = min(m0 + bm, off[e + 1]);
}

// The CTA whose range [b T / G, (b+1) T / G) holds triple x (every range is non-empty: G <= T).
KT_DEV int cta_of(long long x, long long total, int G) {
  int b = int(x * G / total);
  while (b + 1 < G && (long long)(b + 1) * total / G <= x) ++b;
  while (b > 0 && (long long)b * total / G > x) --b;
  return b;
}

template <int MT>
__global__ void __launch_bounds__(Geo<MT>::kThreads, 1) gemm(const __grid_constant__ Args args) {
  using G = Geo<MT>;
  constexpr int kBM = G::kBM, kNT = G::kNT, kSK = G::kSK, kW = G::kW, kR = G::kR, kTPW = G::kTPW;
  const ktune_mxfp4::Params& p = args.p;
  extern __shared__ __align__(128) unsigned char smem[];
  __shared__ float e8m0_f32[256];
  __shared__ alignas(8) unsigned long long bars[2 * kR];  // full[kR], empty[kR]
  __shared__ int4 meta[kR];                               // per stage: m tile, column group, c0, nch | flags
  __shared__ int last_flag;
  float* red0 = reinterpret_cast<float*>(smem + kR * G::kStage);
  int* off = reinterpret_cast<int*>(smem + G::kFixedSmem);  // [E + 1] row offsets (clamped, non-decreasing)
  int* tp = off + (p.num_experts + 1);                      // [E + 1] exclusive prefix of m tiles per expert
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int experts = p.expert_offsets ? p.num_experts : 1;

  // ---- set-up: scale table, zeroed activation rows and reduction buffers, row tables, barriers
  for (int i = tid; i < 256; i += G::kThreads) e8m0_f32[i] = kc::e8m0_to_f32(unsigned(i));
  for (int s = 0; s < kR; ++s)  // rows past a tile's last row are never copied: keep them finite (zero)
    for (int i = tid; i < G::kABytes / 16; i += G::kThreads)
      *reinterpret_cast<uint4*>(smem + s * G::kStage + G::kWBytes + G::kSBytes + 16 * i) = make_uint4(0, 0, 0, 0);
  for (int i = tid; i < 2 * G::kRedFloats; i += G::kThreads) red0[i] = 0.f;
  if (warp == 0) {
    if (p.expert_offsets) {
      // Offsets clamped to [0, m] and made non-decreasing by a running max; expert e owns [off[e], off[e+1]).
      int run_max = 0, run_tiles = 0;
      for (int base = 0; base <= experts; base += 32) {
        const int e = base + lane;
        int v = e <= experts ? min(max(p.expert_offsets[e], 0), p.m) : 0;
        for (int o = 1; o < 32; o *= 2) {
          const int u = __shfl_up_sync(0xffffffffu, v, o);
          if (lane >= o) v = max(v, u);
        }
        v = max(v, run_max);
        if (e <= experts) off[e] = v;
        run_max = __shfl_sync(0xffffffffu, v, 31);
      }
      __syncwarp();
      for (int base = 0; base <= experts; base += 32) {
        const int e = base + lane;
        const int tiles = e < experts ? (off[e + 1] - off[e] + kBM - 1) / kBM : 0;
        int incl = tiles;
        for (int o = 1; o < 32; o *= 2) {
          const int u = __shfl_up_sync(0xffffffffu, incl, o);
          if (lane >= o) incl += u;
        }
        if (e <= experts) tp[e] = run_tiles + incl - tiles;
        run_tiles += __shfl_sync(0xffffffffu, incl, 31);
      }
    } else if (lane == 0) {
      off[0] = 0;
      off[1] = p.m;
      tp[0] = 0;
      tp[1] = (p.m + kBM - 1) / kBM;
    }
  }
  const unsigned bar0 = kc::smem_u32(bars);
  if (tid == 0) {
    for (int s = 0; s < kR; ++s) {
      bar_init(bar0 + 8 * s, 1);
      bar_init(bar0 + 8 * (kR + s), kW);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  // the zeroed activation rows are later overwritten by the copy engine (async proxy)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();

  const int NG = (p.n16 + kNT - 1) / kNT;  // column groups
  const long long T = (long long)tp[experts] * NG * p.kc;
  const long long lo = T * blockIdx.x / gridDim.x, hi = T * (blockIdx.x + 1) / gridDim.x;
  const unsigned ring = kc::smem_u32(smem);

  if (warp == kW) {
    // ---- producer warp: walks [lo, hi) in stages of <= kSK chunks that stay inside one (m tile, column group)
    const unsigned long long pol = evict_first_policy();
    const int groups = (p.kc + 3) / 4;
    const unsigned short* a = static_cast<const unsigned short*>(p.a);
    long long x = lo;
    int i = 0;
    for (;; ++i) {
      const int slot = i % kR;
      if (i >= kR) bar_wait(bar0 + 8 * (kR + slot), ((i / kR) - 1) & 1);
      const unsigned full = bar0 + 8 * slot;
      if (x >= hi) {  // end of the range: a stage with no chunks
        if (lane == 0) {
          meta[slot] = make_int4(0, 0, 0, 0);
          bar_arrive(full);
        }
        break;
      }
      const long long tg = x / p.kc;
      const int c0 = int(x - tg * p.kc);
      const int t = int(tg / NG), g = int(tg % NG);
      const int nch = int(min((long long)min(kSK, p.kc - c0), hi - x));
      const bool last = c0 + nch == p.kc || x + nch == hi;
      const bool partial = tg * p.kc < lo || (tg + 1) * p.kc > hi;
      int e, m0, m1;
      tile_rows(off, tp, experts, kBM, t, e, m0, m1);
      const int rows = m1 - m0, nt0 = g * kNT, ntiles = min(kNT, p.n16 - nt0);
      const int g0 = c0 >> 2, ng = ((c0 + nch - 1) >> 2) - g0 + 1;
      const int kend = min(p.k, (c0 + nch) * 64);
      const unsigned abytes = unsigned(kend - c0 * 64) * 2u;
      const unsigned bytes = unsigned(nch * ntiles * 512 + ntiles * ng * 128) + unsigned(rows) * abytes;
      if (lane == 0) {
        meta[slot] = make_int4(t, g, c0, nch | (last ? kFlagLast : 0) | (partial ? kFlagPartial : 0));
        bar_arrive_tx(full, bytes);
      }
      __syncwarp();
      const unsigned base = ring + slot * G::kStage;
      const unsigned* wsrc = p.w + (long long)e * p.w_expert_words;
      const unsigned* ssrc = p.s + (long long)e * p.s_expert_words;
      for (int j = lane; j < nch + ntiles + rows; j += 32) {
        if (j < nch) {
          bulk_copy(base + j * kNT * 512, wsrc + ((long long)(c0 + j) * p.n16 + nt0) * 128, ntiles * 512, full, pol);
        } else if (j < nch + ntiles) {
          const int ti = j - nch;
          bulk_copy(base + G::kWBytes + ti * G::kSG * 128, ssrc + ((long long)(nt0 + ti) * groups + g0) * 32,
                    ng * 128, full, pol);
        } else {
          const int r = j - nch - ntiles;
          bulk_copy(base + G::kWBytes + G::kSBytes + r * G::kArow, a + (long long)(m0 + r) * p.lda + c0 * 64, abytes,
                    full);
        }
      }
      x += nch;
    }
    return;
  }

  // ---- consumer warps
  const int cw = warp % kSK, q = warp / kSK;  // chunk slot in the stage, tile quarter
  const int ctid = tid;                       // 0 .. 32 kW - 1
  float acc[kTPW][MT][4];
#pragma unroll
  for (int i = 0; i < kTPW; ++i)
#pragma unroll
    for (int j = 0; j < MT; ++j)
#pragma unroll
      for (int r = 0; r < 4; ++r) acc[i][j][r] = 0.f;
  int rb = 0;  // reduction buffer in use
  for (int i = 0;; ++i) {
    const int slot = i % kR;
    bar_wait(bar0 + 8 * slot, (i / kR) & 1);
    const int4 md = meta[slot];
    const int nch = md.w & 0xFF;
    if (nch == 0) break;
    const int ntiles = min(kNT, p.n16 - md.y * kNT);
    if (cw < nch) {
      const int c = md.z + cw;
      const unsigned base = ring + slot * G::kStage;
      const unsigned wb = base + (cw * kNT + q * kTPW) * 512 + lane * 16;
      const unsigned sb = base + G::kWBytes + (q * kTPW * G::kSG + ((c >> 2) - (md.z >> 2))) * 128 +
                          ((lane & ~3) | (c & 3)) * 4;
      const unsigned ab = base + G::kWBytes + G::kSBytes + (lane & 7) * G::kArow + cw * 128 + (lane >> 3) * 16;
      const bool half = c * 64 + 32 >= p.k;  // last chunk of a k % 64 == 32 problem: k16 steps 2, 3 are padding
      unsigned b[MT][8];  // b[j][2s + h]: the m16n8k16 B fragment of k16 step s
#pragma unroll
      for (int j = 0; j < MT; ++j) {
        unsigned lo4[4], hi4[4];
        kc::ldmatrix_x4(lo4, ab + 8 * j * G::kArow);       // k16 steps 0, 1
        kc::ldmatrix_x4(hi4, ab + 8 * j * G::kArow + 64);  // k16 steps 2, 3
#pragma unroll
        for (int x = 0; x < 4; ++x) {
          b[j][x] = lo4[x];
          b[j][4 + x] = half ? 0u : hi4[x];
        }
      }
#pragma unroll
      for (int ii = 0; ii < kTPW; ++ii) {
        if (q * kTPW + ii < ntiles) {
          uint4 w;
          unsigned sc;
          asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];"
                       : "=r"(w.x), "=r"(w.y), "=r"(w.z), "=r"(w.w)
                       : "r"(wb + ii * 512));
          asm volatile("ld.shared.u32 %0, [%1];" : "=r"(sc) : "r"(sb + ii * G::kSG * 128));
#pragma unroll
          for (int sp = 0; sp < 4; sp += 2) {
            float tmp[MT][4];
#pragma unroll
            for (int j = 0; j < MT; ++j)
#pragma unroll
              for (int r = 0; r < 4; ++r) tmp[j][r] = 0.f;
#pragma unroll
            for (int h = 0; h < 2; ++h) {
              const int s = sp + h;
              const unsigned word = s == 0 ? w.x : s == 1 ? w.y : s == 2 ? w.z : w.w;
              unsigned af[4];
              af[0] = kc::bf16x2_fma(kc::e2m1x2_raw<0, true>(word), 0x7E807E80u, 0x80008000u);
              af[1] = kc::bf16x2_fma(kc::e2m1x2_raw<1, true>(word), 0x7E807E80u, 0x80008000u);
              af[2] = kc::bf16x2_fma(kc::e2m1x2_raw<2, true>(word), 0x7E807E80u, 0x80008000u);
              af[3] = kc::bf16x2_fma(kc::e2m1x2_raw<3, true>(word), 0x7E807E80u, 0x80008000u);
#pragma unroll
              for (int j = 0; j < MT; ++j) kc::mma_16816<true>(tmp[j], af, b[j][2 * s], b[j][2 * s + 1]);
            }
            // bytes (row r0, block), (row r1, block) of the chunk's 32-block sp / 2
            const float f0 = e8m0_f32[(sc >> (8 * sp)) & 0xFFu], f1 = e8m0_f32[(sc >> (8 * sp + 8)) & 0xFFu];
#pragma unroll
            for (int j = 0; j < MT; ++j) {
              acc[ii][j][0] = fmaf(tmp[j][0], f0, acc[ii][j][0]);
              acc[ii][j][1] = fmaf(tmp[j][1], f0, acc[ii][j][1]);
              acc[ii][j][2] = fmaf(tmp[j][2], f1, acc[ii][j][2]);
              acc[ii][j][3] = fmaf(tmp[j][3], f1, acc[ii][j][3]);
            }
          }
        }
      }
    }
    __syncwarp();
    if (lane == 0) bar_arrive(bar0 + 8 * (kR + slot));  // slot free (its reads are done)
    if (!(md.w & kFlagLast)) continue;

    // ---- the CTA leaves (m tile md.x, column group md.y): reduce the 16 warps' sums and store
    int e, m0, m1;
    tile_rows(off, tp, experts, kBM, md.x, e, m0, m1);
    const int rows = m1 - m0, nt0 = md.y * kNT;
    float* red = red0 + rb * G::kRedFloats;
#pragma unroll
    for (int ii = 0; ii < kTPW; ++ii)
#pragma unroll
      for (int j = 0; j < MT; ++j)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int ml = 8 * j + 2 * (lane % 4) + (r & 1), nl = (q * kTPW + ii) * 16 + lane / 4 + 8 * (r >> 1);
          if (ml < rows && q * kTPW + ii < ntiles) atomicAdd(&red[ml * kNT * 16 + nl], acc[ii][j][r]);
          acc[ii][j][r] = 0.f;
        }
    consumers_sync<32 * kW>();  // (the other buffer serves the next flush: no second barrier)
    const bool partial = md.w & kFlagPartial;
    const unsigned short* bias = static_cast<const unsigned short*>(p.bias);
    unsigned short* cout = static_cast<unsigned short*>(p.c);
    for (int idx = ctid; idx < rows * kNT * 16; idx += 32 * kW) {
      const int ml = idx / (kNT * 16), n = nt0 * 16 + idx % (kNT * 16);
      const float v = red[idx];
      red[idx] = 0.f;
      if (n >= p.n) continue;
      if (partial) {
        atomicAdd(args.ws + (long long)(m0 + ml) * p.n + n, v);
      } else {
        const float bv = bias ? kc::bf16_to_float(bias[(long long)e * p.n + n]) : 0.f;
        cout[(long long)(m0 + ml) * p.ldc + n] = kc::float_to_bf16(v + bv);
      }
    }
    rb ^= 1;
    if (!partial) continue;
    // split group: the last of its contributors converts the workspace sums and clears them and the counter
    __threadfence();
    consumers_sync<32 * kW>();
    if (ctid == 0) {
      const long long tg = (long long)md.x * NG + md.y;
      const int contributors = cta_of((tg + 1) * p.kc - 1, T, gridDim.x) - cta_of(tg * p.kc, T, gridDim.x) + 1;
      const int old = atomicAdd(args.cnt + tg, 1);
      last_flag = old == contributors - 1;
      if (old == contributors - 1) atomicExch(args.cnt + tg, 0);
    }
    consumers_sync<32 * kW>();
    if (last_flag) {
      __threadfence();
      for (int idx = ctid; idx < rows * kNT * 16; idx += 32 * kW) {
        const int ml = idx / (kNT * 16), n = nt0 * 16 + idx % (kNT * 16);
        if (n >= p.n) continue;
        const float v = atomicExch(args.ws + (long long)(m0 + ml) * p.n + n, 0.f);
        const float bv = bias ? kc::bf16_to_float(bias[(long long)e * p.n + n]) : 0.f;
        cout[(long long)(m0 + ml) * p.ldc + n] = kc::float_to_bf16(v + bv);
      }
    }
  }
}

}  // namespace bulk

// ---- the library kernel (templates/mxfp4_gemm/kernel.cuh), built here from its template ---------------------
namespace lib {
template <int kBMv, int kTNv, int kWNv, int kWKv, int kStagesv, int kDepthv, bool kGroupedv>
struct Spec {
  static constexpr bool kNative = false, kTcgen05 = false, kWgmma = false;
  static constexpr int kAType = ::ktune_common::kBF16, kOutType = ::ktune_common::kBF16;
  static constexpr bool kGrouped = kGroupedv;
  static constexpr int kBM = kBMv, kTN = kTNv, kWN = kWNv, kWK = kWKv, kStages = kStagesv, kDepth = kDepthv;
};
}  // namespace lib

using mxfp4_dev::read_all;  // the floor (mxfp4_read_floor.cuh)

// ---- random inputs on the device (dev_timing::hash32: fresh seeds cost nothing)
__global__ void fill_codes(unsigned* w, long long words, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words; i += (long long)gridDim.x * blockDim.x)
    w[i] = dev_timing::hash32((unsigned long long)i * 0x9E3779B97F4A7C15ull + seed);
}
__global__ void fill_scales(unsigned* s, long long words, unsigned seed) {  // every byte in [118, 125]: 2^-9 .. 2^-2
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < words; i += (long long)gridDim.x * blockDim.x)
    s[i] = 0x76767676u + (dev_timing::hash32((unsigned long long)i * 0xD1B54A32D192ED03ull + seed) & 0x07070707u);
}
__global__ void fill_act(unsigned short* a, long long n, unsigned seed) {  // ~N(0, 1): sum of 4 uniforms, scaled
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const unsigned h0 = dev_timing::hash32((unsigned long long)i * 2 + seed * 0x100000001ull);
    const unsigned h1 = dev_timing::hash32((unsigned long long)i * 2 + 1 + seed * 0x100000001ull);
    const float u = float(h0 & 0xFFFF) + float(h0 >> 16) + float(h1 & 0xFFFF) + float(h1 >> 16);
    a[i] = kc::float_to_bf16((u / 65536.f - 2.f) * 1.7320508f);
  }
}
__global__ void fill_bias(unsigned short* b, long long n, unsigned seed) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
    b[i] = kc::float_to_bf16(float(int(dev_timing::hash32(i + seed * 7ull) % 2001) - 1000) * 1e-3f);
}

// ---- harness state
struct Problem {
  const char* name;
  int m, n, k, experts;  // experts == 0: dense
  std::vector<int> offsets;
};
struct Bufs {
  unsigned *w = nullptr, *s = nullptr;
  unsigned short *a = nullptr, *c_lib = nullptr, *c_new = nullptr, *bias = nullptr;
  int* offs = nullptr;
  float* ws = nullptr;
  int* cnt = nullptr;
  size_t wbytes = 0, sbytes = 0;
  int mtiles_max = 0;
};
static int g_sms = 0;

static ktune_mxfp4::Params params_of(const Problem& pr, const Bufs& b, bool with_bias) {
  ktune_mxfp4::Params p = packed_dev_params(b.a, b.c_lib, b.w, b.s, pr.m, pr.n, pr.k, pr.experts, b.offs);
  p.bias = with_bias ? b.bias : nullptr;
  return p;
}

static Bufs alloc(const Problem& pr) {
  Bufs b;
  const int E = pr.experts ? pr.experts : 1;
  const long long n16 = (pr.n + 15) / 16;
  packed_dev_bytes(pr.n, pr.k, E, &b.wbytes, &b.sbytes);
  CK(cudaMalloc(&b.w, b.wbytes));
  CK(cudaMalloc(&b.s, b.sbytes));
  CK(cudaMalloc(&b.a, size_t(pr.m) * pr.k * 2));
  CK(cudaMalloc(&b.c_lib, size_t(pr.m) * pr.n * 2));
  CK(cudaMalloc(&b.c_new, size_t(pr.m) * pr.n * 2));
  CK(cudaMalloc(&b.bias, size_t(E) * pr.n * 2));
  CK(cudaMalloc(&b.ws, size_t(pr.m) * pr.n * 4));
  CK(cudaMemset(b.ws, 0, size_t(pr.m) * pr.n * 4));
  b.mtiles_max = (pr.m + 7) / 8 + E;
  const size_t ncnt = size_t(b.mtiles_max) * ((n16 + 7) / 8);
  CK(cudaMalloc(&b.cnt, ncnt * 4));
  CK(cudaMemset(b.cnt, 0, ncnt * 4));
  if (pr.experts) {
    CK(cudaMalloc(&b.offs, pr.offsets.size() * 4));
    CK(cudaMemcpy(b.offs, pr.offsets.data(), pr.offsets.size() * 4, cudaMemcpyHostToDevice));
  }
  return b;
}
static void release(Bufs& b) {
  CK(cudaFree(b.w));
  CK(cudaFree(b.s));
  CK(cudaFree(b.a));
  CK(cudaFree(b.c_lib));
  CK(cudaFree(b.c_new));
  CK(cudaFree(b.bias));
  CK(cudaFree(b.ws));
  CK(cudaFree(b.cnt));
  if (b.offs) CK(cudaFree(b.offs));
}
static void randomize(const Problem& pr, Bufs& b, unsigned seed) {
  const int E = pr.experts ? pr.experts : 1;
  fill_codes<<<1024, 256>>>(b.w, (long long)(b.wbytes / 4), seed);
  CK(cudaGetLastError());
  fill_scales<<<1024, 256>>>(b.s, (long long)(b.sbytes / 4), seed + 1);
  CK(cudaGetLastError());
  fill_act<<<256, 256>>>(b.a, (long long)pr.m * pr.k, seed + 2);
  CK(cudaGetLastError());
  fill_bias<<<64, 256>>>(b.bias, (long long)E * pr.n, seed + 3);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
}

// ---- launchers
template <class S>
static void launch_lib(const Problem& pr, const Bufs& b, bool with_bias, cudaStream_t st = 0) {
  constexpr ktune_mxfp4::Shape sh = ktune_mxfp4::K<S>::kS;
  auto kern = ktune_mxfp4::gemm_kernel<S>;
  static bool init = false;
  if (!init) {
    allow_smem(kern, sh.smem_total);
    init = true;
  }
  ktune_mxfp4::Params p = params_of(pr, b, with_bias);
  p.c = b.c_lib;
  const int n16 = p.n16;
  const dim3 grid((n16 + S::kTN * S::kWN - 1) / (S::kTN * S::kWN),
                  (pr.m + S::kBM - 1) / S::kBM + (S::kGrouped ? pr.experts : 0));
  kern<<<grid, sh.threads, sh.smem_total, st>>>(p);
}

template <int MT>
static void launch_new(const Problem& pr, const Bufs& b, bool with_bias, int grid_cap = 0, cudaStream_t st = 0) {
  using G = bulk::Geo<MT>;
  const int E = pr.experts ? pr.experts : 1;
  const int smem = G::smem_bytes(E);
  static int set = -1;
  if (set < smem) {
    CK(cudaFuncSetAttribute(bulk::gemm<MT>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    set = smem;
  }
  bulk::Args args{};
  args.p = params_of(pr, b, with_bias);
  args.p.c = b.c_new;
  args.ws = b.ws;
  args.cnt = b.cnt;
  args.mtiles_max = b.mtiles_max;
  // Work (triples) is known on the host for the dense case; grouped, the device derives the m tiles from the
  // offsets, so the host bounds it by the (m tiles upper bound) and the kernel's ranges stay non-empty only when
  // G <= T: use the exact tile count the host can compute from the same offsets it uploaded.
  long long mt = 0;
  if (pr.experts) {
    int run = 0;
    std::vector<int> o(pr.experts + 1);
    for (int e = 0; e <= pr.experts; ++e) {
      run = std::max(run, std::min(std::max(pr.offsets[e], 0), pr.m));
      o[e] = run;
    }
    for (int e = 0; e < pr.experts; ++e) mt += (o[e + 1] - o[e] + G::kBM - 1) / G::kBM;
  } else {
    mt = (pr.m + G::kBM - 1) / G::kBM;
  }
  const long long total = mt * ((args.p.n16 + G::kNT - 1) / G::kNT) * args.p.kc;
  int grid = int(std::min<long long>(grid_cap > 0 ? grid_cap : g_sms, total));
  if (grid < 1) return;
  bulk::gemm<MT><<<grid, G::kThreads, smem, st>>>(args);
}

// ---- check: new vs library on the current inputs; returns false on mismatch / NaN
static bool compare(const Problem& pr, const Bufs& b, const char* what, double* out_err = nullptr) {
  const size_t n = size_t(pr.m) * pr.n;
  std::vector<unsigned short> hl(n), hn(n);
  CK(cudaMemcpy(hl.data(), b.c_lib, n * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(hn.data(), b.c_new, n * 2, cudaMemcpyDeviceToHost));
  const dev_timing::Bf16Diff d = dev_timing::diff_bf16(hl, hn);
  const bool ok = d.nan_ref == 0 && d.nan_got == 0 && d.max_rel <= 1e-2;
  std::printf("check %-26s %-8s max rel %.3e (at m %zu n %zu: lib %.5g new %.5g)  norm rel %.3e  NaN lib %zu new %zu  %s\n",
              pr.name, what, d.max_rel, d.worst / pr.n, d.worst % pr.n, kc::bf16_to_float(hl[d.worst]),
              kc::bf16_to_float(hn[d.worst]), d.norm_rel, d.nan_ref, d.nan_got, ok ? "ok" : "MISMATCH");
  if (out_err) *out_err = d.max_rel;
  return ok;
}

template <class LibS, int MT>
static bool check_case(const Problem& pr, Bufs& b, unsigned seed, bool with_bias, int grid_cap, const char* what) {
  randomize(pr, b, seed);
  CK(cudaMemset(b.c_lib, 0xFF, size_t(pr.m) * pr.n * 2));  // bf16 0xFFFF: NaN
  CK(cudaMemset(b.c_new, 0xFF, size_t(pr.m) * pr.n * 2));
  launch_lib<LibS>(pr, b, with_bias);
  CK(cudaGetLastError());
  launch_new<MT>(pr, b, with_bias, grid_cap);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  bool ok = compare(pr, b, what);
  // a second call on the same buffers: the workspace and counters must have been left clean
  CK(cudaMemset(b.c_new, 0xFF, size_t(pr.m) * pr.n * 2));
  launch_new<MT>(pr, b, with_bias, grid_cap);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  ok = compare(pr, b, "again") && ok;
  return ok;
}

struct Row {
  std::string shape, kernel;
  double us, tbs, ratio;
};
static std::vector<Row> g_rows;
static double g_copy_rw = 0;  // the D2D copy's read + write rate of the current shape (TB/s)

static void add_row(const std::string& shape, const std::string& kernel, double us, double bytes) {
  const double tbs = bytes / us / 1e6;
  g_rows.push_back({shape, kernel, us, tbs, g_copy_rw > 0 ? tbs / g_copy_rw : 0});
  std::printf("  %-28s %-34s %9.2f us  %5.2f TB/s\n", shape.c_str(), kernel.c_str(), us, tbs);
}

static void floors(const std::string& shape, const Bufs& b) {
  const double bytes = double(b.wbytes + b.sbytes);
  void* dst = nullptr;
  CK(cudaMalloc(&dst, b.wbytes + b.sbytes));
  const double cus = dev_timing::median_us([&] {
    CK(cudaMemcpyAsync(dst, b.w, b.wbytes, cudaMemcpyDeviceToDevice));
    CK(cudaMemcpyAsync(static_cast<char*>(dst) + b.wbytes, b.s, b.sbytes, cudaMemcpyDeviceToDevice));
  });
  CK(cudaFree(dst));
  g_copy_rw = 2 * bytes / cus / 1e6;
  add_row(shape, "cudaMemcpy D2D (TB/s: read)", cus, bytes);
  unsigned* out = nullptr;
  CK(cudaMalloc(&out, 4));
  const double rus = dev_timing::median_us([&] {
    read_all<<<4 * g_sms, 512>>>(reinterpret_cast<const uint4*>(b.w), (long long)(b.wbytes / 16),
                                 reinterpret_cast<const uint4*>(b.s), (long long)(b.sbytes / 16), out);
  });
  CK(cudaFree(out));
  add_row(shape, "pure read (4 x SMs x 512)", rus, bytes);
}

// ---- shapes
using LibDense1 = lib::Spec<8, 4, 1, 16, 0, 2, false>;   // bm8.tn4.wn1.wk16.s0.d2 (dense <= 8 rows, N, K >= 8192)
using LibDense16 = lib::Spec<16, 4, 1, 8, 3, 2, false>;  // bm16.tn4.wn1.wk8.s3.d2 (dense 9..16 rows)
using LibGroup = lib::Spec<8, 4, 2, 1, 0, 2, true>;      // bm8.tn4.wn2.wk1.s0.d2 (grouped <= 4 rows per expert)
using LibGroupB = lib::Spec<8, 2, 1, 8, 0, 2, true>;     // bm8.tn2.wn1.wk8.s0.d2 (second grouped tiling)

static Problem grouped(const char* name, int E, int rows, int n, int k) {
  Problem pr{name, E * rows, n, k, E, {}};
  for (int e = 0; e <= E; ++e) pr.offsets.push_back(e * rows);
  return pr;
}

static int run_small(unsigned seed) {
  bool ok = true;
  // dense: ragged N (13 tiles, a partial column group, n % 16 != 0), K % 64 == 32 (a half chunk), few CTAs so
  // every column group is split over several of them
  {
    Problem pr{"dense m3 n200 k352", 3, 200, 352, 0, {}};
    Bufs b = alloc(pr);
    ok = check_case<LibDense1, 1>(pr, b, seed, true, 5, "grid5") && ok;
    ok = check_case<LibDense1, 1>(pr, b, seed + 10, false, 0, "gridSM") && ok;
    release(b);
  }
  {
    Problem pr{"dense m13 n200 k352", 13, 200, 352, 0, {}};
    Bufs b = alloc(pr);
    ok = check_case<LibDense16, 2>(pr, b, seed + 20, true, 7, "grid7") && ok;
    ok = check_case<LibDense16, 2>(pr, b, seed + 25, false, 1, "grid1") && ok;  // one CTA: no split group
    release(b);
  }
  // grouped: an empty expert, 1..4 rows, one expert over two 8-row tiles
  {
    Problem pr{"grouped E5 n200 k352", 16, 200, 352, 5, {0, 1, 1, 5, 15, 16}};
    Bufs b = alloc(pr);
    ok = check_case<LibGroup, 1>(pr, b, seed + 30, true, 7, "grid7") && ok;
    ok = check_case<LibGroup, 1>(pr, b, seed + 40, false, 0, "gridSM") && ok;
    release(b);
  }
  // grouped, 4 rows per expert (the decode shape's form), k % 64 == 0, 16 experts over 9 CTAs
  {
    Problem pr = grouped("grouped E16 x4 n176 k320", 16, 4, 176, 320);
    Bufs b = alloc(pr);
    ok = check_case<LibGroup, 1>(pr, b, seed + 50, true, 9, "grid9") && ok;
    release(b);
  }
  std::printf("%s\n", ok ? "small: all ok" : "small: MISMATCH");
  return ok ? 0 : 1;
}

template <class LibS, int MT>
static bool bench_shape(const Problem& pr, unsigned seed, const char* lib_key) {
  Bufs b = alloc(pr);
  bool ok = check_case<LibS, MT>(pr, b, seed, false, 0, "check");
  const double bytes = double(b.wbytes + b.sbytes);
  char shape[64];
  std::snprintf(shape, sizeof shape, "%s", pr.name);
  floors(shape, b);
  add_row(shape, std::string("library ") + lib_key, dev_timing::median_us([&] { launch_lib<LibS>(pr, b, false); }), bytes);
  if (pr.experts)
    add_row(shape, "library bm8.tn2.wn1.wk8.s0.d2", dev_timing::median_us([&] { launch_lib<LibGroupB>(pr, b, false); }), bytes);
  char nk[64];
  std::snprintf(nk, sizeof nk, "bulk ring bm%d nt8 sk8 r%d", 8 * MT, bulk::Geo<MT>::kR);
  add_row(shape, nk, dev_timing::median_us([&] { launch_new<MT>(pr, b, false); }), bytes);
  add_row(shape, std::string(nk) + " (again)", dev_timing::median_us([&] { launch_new<MT>(pr, b, false); }), bytes);
  // the outputs after all those calls still match (workspace left clean by every call)
  ok = compare(pr, b, "after") && ok;
  release(b);
  return ok;
}

int main(int argc, char** argv) {
  bool small = false;
  const char* only = "";  // run only the shapes whose name contains this (e.g. for a profiler)
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--small")) small = true;
    else if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else {
      std::fprintf(stderr, "usage: %s [--small] [--only SHAPE_SUBSTRING]\n", argv[0]);
      return 2;
    }
  }
  auto want = [&](const char* name) { return std::strstr(name, only) != nullptr; };
  int dev = 0;
  CK(cudaGetDevice(&dev));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, dev));
  g_sms = prop.multiProcessorCount;
  const unsigned seed = std::random_device{}();
  std::printf("device %s, %d SMs; seed %u\n", prop.name, g_sms, seed);
  {
    cudaFuncAttributes fa{};
    CK(cudaFuncGetAttributes(&fa, bulk::gemm<1>));
    std::printf("bulk::gemm<bm8>:  %d regs, %zu B static smem, %zu B local; dynamic %d B (E = 128)\n", fa.numRegs,
                fa.sharedSizeBytes, fa.localSizeBytes, bulk::Geo<1>::smem_bytes(128));
    CK(cudaFuncGetAttributes(&fa, bulk::gemm<2>));
    std::printf("bulk::gemm<bm16>: %d regs, %zu B static smem, %zu B local; dynamic %d B (dense)\n", fa.numRegs,
                fa.sharedSizeBytes, fa.localSizeBytes, bulk::Geo<2>::smem_bytes(1));
  }
  if (small) return run_small(seed);

  bool ok = true;
  if (want("dense M1 N8192 K8192"))
    ok = bench_shape<LibDense1, 1>(Problem{"dense M1 N8192 K8192", 1, 8192, 8192, 0, {}}, seed,
                                   "bm8.tn4.wn1.wk16.s0.d2") &&
         ok;
  if (want("dense M16 N8192 K8192"))
    ok = bench_shape<LibDense16, 2>(Problem{"dense M16 N8192 K8192", 16, 8192, 8192, 0, {}}, seed + 100,
                                    "bm16.tn4.wn1.wk8.s3.d2") &&
         ok;
  if (want("moe E128 x1 n5760 k2880"))
    ok = bench_shape<LibGroup, 1>(grouped("moe E128 x1 n5760 k2880", 128, 1, 5760, 2880), seed + 200,
                                  "bm8.tn4.wn2.wk1.s0.d2") &&
         ok;
  if (want("moe E128 x4 n5760 k2880"))
    ok = bench_shape<LibGroup, 1>(grouped("moe E128 x4 n5760 k2880", 128, 4, 5760, 2880), seed + 300,
                                  "bm8.tn4.wn2.wk1.s0.d2") &&
         ok;

  std::printf("\n%-28s %-34s %9s %8s %8s\n", "shape", "kernel", "us", "TB/s", "x copy");
  for (const Row& r : g_rows)
    std::printf("%-28s %-34s %9.2f %8.2f %8.2f\n", r.shape.c_str(), r.kernel.c_str(), r.us, r.tbs, r.ratio);
  std::printf("TB/s: packed weight + scale bytes / time; x copy: that over the D2D copy's read + write rate\n");
  std::printf("%s\n", ok ? "checks: all ok" : "checks: MISMATCH");
  return ok ? 0 : 1;
}
