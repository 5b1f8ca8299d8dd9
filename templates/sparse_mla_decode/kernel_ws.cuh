// sparse_mla_decode, warp-specialized (config ".ws"): sm_90a, fp8_ds_mla cache, 64 heads per CTA, 64-slot tiles.
//
// The kernel in kernel.cuh runs every phase in the same eight warps, one after another between CTA barriers, and
// the FP8 dequantization sits between the tensor-core phases (about a quarter of its time at 128 heads, fp8).
// Here the dequantization runs beside them. 384 threads = three warpgroups:
//   warpgroup 2, the producer: loads each tile's rows from global memory straight into registers (16-byte
//            loads, all of a tile's in flight at once, issued right after the last tile's hand-off; no raw tile
//            in shared memory), waits until the consumers have released a bf16 K/V buffer, converts (the same
//            conversion as kernel.cuh: store_item) and stores the bf16 rows and the tile's slot list, then signals
//            the buffer full.
//   warpgroup 0: S = Q K^T for all 64 heads x 64 slots by wgmma (m64n64k16, whole rows in one warpgroup, so the
//            online softmax needs no exchange), the softmax on the accumulators, P and the rows' rescale factors
//            to shared memory, then O[:, 0 : LAT/2] += P V by wgmma. It announces P and goes on without waiting
//            for warpgroup 1 to take it.
//   warpgroup 1: O[:, LAT/2 : LAT] += P V by wgmma, with P and the factors warpgroup 0 left in shared memory.
// Warpgroup 0's Q K^T of tile i+1 runs on the tensor cores while warpgroup 1 finishes P V of tile i. A consumer
// warp skips the O rescale when all its rows' factors are 1 (the running max held; x * 1 = x, so the result is
// the same): 128 multiplies per thread and tile that would take issue slots from the producer.
// Two bf16 K/V buffers (stages = 2) fit next to Q and P: 64 x 576 x 2 B each; 226 KB in all.
// Hand-offs: the K/V buffer b full (the producer's 128 threads arrive, both consumer warpgroups wait), P free
// again (warpgroup 1 arrives, warpgroup 0 waits), P of a tile with its rescale factors ready (warpgroup 0 arrives
// and both warpgroups wait: warpgroup 0's own P V reads all four of its warps' rows) and the rows' max and sum
// for the epilogue are mbarriers: each thread arrives with release after its stores, the readers wait with acquire
// on the phase. Only "buffer b empty" is a named barrier (the consumers' barrier.arrive, the producer's
// barrier.sync), because a producer polling an mbarrier takes issue slots from the consumers and its wait loop
// spills. The named barriers are the non-.aligned forms: bar.sync and bar.arrive mean barrier.sync.aligned /
// barrier.arrive.aligned, which require every thread to execute the same barrier instruction, and the roles reach
// each barrier from different code (compute-sanitizer's synccheck reports the .aligned forms here as divergent).
// Why mbarriers where a named barrier would order the same accesses: compute-sanitizer's racecheck follows an
// mbarrier's ordering in this kernel and not a named barrier's. With the factors, the slot lists or P handed over
// on named barriers it reported each read as a hazard against its store, and the kernel could not be checked
// (bench/dev/mla_ws_race_variants.cu keeps the variants that located this).
// Registers: ptxas fits every role within the launch bound's 168 per thread (warpgroup 0 holds 160 accumulator
// values: half of O and the scores). The setmaxnreg calls (208 / 160 / 136) only repartition the hardware
// allocation; they do not let ptxas give a role more than the bound (with 512 threads, a bound of 128, warpgroup
// 0 spilled 2.7 KB).
// Only one CTA fits an SM (226 KB of shared memory).
// Same results contract as decode_kernel: splits, sinks, LSE, -1 slots, checked slots, all-masked rows.
#pragma once

#include "common/tma.cuh"
#include "sparse_mla_decode/kernel.cuh"

namespace ktune_mla {

template <class S>
struct WsTraits {
  static constexpr Shape sh =
      make_shape(S::kLat, S::kRope, S::kFp8, S::kHeadsPerCta, S::kTile, S::kStages, 12, /*ws=*/true);
  static_assert(shape_error(sh) == nullptr, "invalid warp-specialized sparse_mla_decode shape (see shape_error)");
  static_assert(S::kNumHeads % 64 == 0, "the warp-specialized kernel needs a multiple of 64 heads");
};

namespace ws {

// Named barrier ids (0 is __syncthreads): K/V buffer b empty (both consumer warpgroups arrive; the producer waits).
// The mbarriers at Shape::off_bar (byte offsets below; Shape reserves 3 + stages of them):
//   P ready    128 arrivals of warpgroup 0, one phase per tile; both warpgroups wait with parity it & 1
//              (warpgroup 0 cannot complete the next phase before warpgroup 1 has released P: never a phase ahead);
//   stats      128 arrivals of warpgroup 0, one phase: the rows' max and sum;
//   P free     128 arrivals of warpgroup 1 after its P V of tile it (phase it); warpgroup 0 waits before
//              writing P of tile it + 1;
//   full b     128 arrivals of the producer per fill of buffer b (phase j / stages for tile j); the producer
//              cannot complete the next phase before the consumers released the buffer on "empty".
enum : int { kBarEmpty = 3 };
enum : int { kMbarPReady = 0, kMbarStats = 8, kMbarPFree = 16, kMbarFull = 24 };
constexpr int kAll = 384;
constexpr int kRegsQK = 208, kRegsPV = 160, kRegsProducer = 136;

KT_DEV void bar_sync(int id, int threads) {
  asm volatile("barrier.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
KT_DEV void bar_arrive(int id, int threads) {
  asm volatile("barrier.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// This thread's arrival on an mbarrier, releasing its earlier shared-memory stores to the waiters.
KT_DEV void mbar_arrive(unsigned bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.release.cta.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
#endif
}
template <int kRegs>
KT_DEV void regs_dec() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(kRegs));
#endif
}
template <int kRegs>
KT_DEV void regs_inc() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(kRegs));
#endif
}
// 16 bytes of a cache row into registers: read-only path, not kept in L1, the L2 fetching the 256 bytes around it
// (faster than L2::128B or no hint: docs/sparse_mla_decode.md). Nothing is read when ok is false;
// v keeps what the caller put there.
KT_DEV void ld_row_v4(uint4& v, const void* p, bool ok) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{ .reg .pred q; setp.ne.b32 q, %5, 0; @q ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4]; }"
      : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
      : "l"(p), "r"(int(ok)));
#endif
}

}  // namespace ws

// One producer thread's share of one cache row: latent items lm, lm + 4, ... (16 e4m3 each), rope items lm,
// lm + 4, ... (8 bf16 each; store_item numbering), and the row's 128-block scales; slot -1: nothing loaded, zeros.
template <int LPT, int RPT>
struct RowShare {
  uint4 lat[LPT], rope[RPT], scale;
  int slot;
};

// The producer warpgroup (threads 256..383). Row r of a tile belongs to the four threads with lr = r % 8 and
// warp pw = (r / 8) % 4 (rows u * 32 + pw * 8 + lr, round u < TN / 32); thread lm = 0..3 of the four loads its
// RowShare. A tile's loads are all issued before the wait for a free buffer, so their latency overlaps it.
template <class S>
KT_DEV void produce_ws(const Params& p, unsigned char* smem, int t_begin, int ntiles, int token, int pw, int lane) {
  constexpr Shape sh = WsTraits<S>::sh;
  constexpr int LAT = S::kLat, TN = S::kTile, ST = S::kStages, TOPK = S::kTopk, RB = sh.raw_bytes;
  constexpr int ROWS = TN / 32, LPT = LAT / 16 / 4, RPT = S::kRope / 8 / 4, NSC = LAT / 128;
  static_assert(NSC <= 4 && LPT * 4 * 16 == LAT && RPT * 4 * 8 == S::kRope, "row split of the producer");
  const int lm = lane >> 3, lr = lane & 7;
  const int* idx = p.indices + (long long)token * TOPK;
  const char* kvb = static_cast<const char*>(p.kv_cache);
  int* s_slot = reinterpret_cast<int*>(smem + sh.off_slot);
  const unsigned mb_full = kc::smem_u32(smem) + sh.off_bar + ws::kMbarFull;
  // Raw top-k entry of row u of local tile j (-1 past the split's tiles or past topk), loaded tiles ahead.
  auto entry = [&](int j, int u) {
    const int pos = (t_begin + j) * TN + u * 32 + pw * 8 + lr;
    return j < ntiles && pos < TOPK ? __ldg(idx + pos) : -1;
  };
  // Issues this thread's loads of a row with top-k entry e (a checked kernel reports and skips a bad one).
  auto issue = [&](RowShare<LPT, RPT>& sh_, int e) {
    bool valid = e >= 0;
    if constexpr (S::kChecked) {
      if (e != -1 && lm == 0)
        valid = kc::check_index(p.report, kc::kCheckTopkIndex, (unsigned)token, e, p.num_slots);
      else if (e != -1)
        valid = e >= 0 && e < p.num_slots;
    }
    sh_.slot = valid ? e : -1;
    const bool ok = valid;
    const char* row = kvb + (long long)(valid ? e : 0) * RB;
#pragma unroll
    for (int k = 0; k < LPT; ++k) {
      sh_.lat[k] = make_uint4(0, 0, 0, 0);
      ws::ld_row_v4(sh_.lat[k], row + (lm + 4 * k) * 16, ok);
    }
    sh_.scale = make_uint4(0, 0, 0, 0);
    ws::ld_row_v4(sh_.scale, row + LAT, ok);
#pragma unroll
    for (int k = 0; k < RPT; ++k) {
      sh_.rope[k] = make_uint4(0, 0, 0, 0);
      ws::ld_row_v4(sh_.rope[k], row + LAT + 4 * NSC + (lm + 4 * k) * 16, ok);
    }
  };
  // Converts a loaded share into row r of the bf16 K/V tile kvt, and records the row's slot.
  auto convert = [&](const RowShare<LPT, RPT>& sh_, unsigned char* kvt, int b, int r) {
    const float sc[4] = {__uint_as_float(sh_.scale.x), __uint_as_float(sh_.scale.y), __uint_as_float(sh_.scale.z),
                         __uint_as_float(sh_.scale.w)};
#pragma unroll
    for (int k = 0; k < LPT; ++k) {
      const int c = lm + 4 * k;
      store_item<LAT, TN>(RawItem{sh_.lat[k], sc[c >> 3] * kc::kE4m3Fold}, kvt, r, c);
    }
#pragma unroll
    for (int k = 0; k < RPT; ++k) store_item<LAT, TN>(RawItem{sh_.rope[k], 0.f}, kvt, r, LAT / 16 + lm + 4 * k);
    if (lm == 0) s_slot[b * TN + r] = sh_.slot;
  };

  // A tile's loads are issued at the top of its iteration, just after the last tile was handed over, so they
  // are in flight while the producer waits for a free buffer. (The proxy fence before a hand-off is a MEMBAR in
  // SASS, which would wait for any load in flight, so issuing the next tile's loads before it is slower; so is
  // an L2 prefetch of the rows 1-3 tiles ahead.)
  int ecur[ROWS], enext[ROWS];  // entries of tiles j and j + 1 (loaded a tile ahead of their use)
#pragma unroll
  for (int u = 0; u < ROWS; ++u) {
    ecur[u] = entry(0, u);
    enext[u] = entry(1, u);
  }
#pragma unroll 1
  for (int j = 0; j < ntiles; ++j) {
    const int b = j % ST;
    RowShare<LPT, RPT> share[ROWS];
    int enext2[ROWS];
#pragma unroll
    for (int u = 0; u < ROWS; ++u) issue(share[u], ecur[u]);
#pragma unroll
    for (int u = 0; u < ROWS; ++u) enext2[u] = entry(j + 2, u);
    if (j >= ST) ws::bar_sync(ws::kBarEmpty + b, ws::kAll);  // the consumers are done with tile j - ST
    unsigned char* kvt = smem + sh.off_kv + b * sh.kv_tile_bytes;
#pragma unroll
    for (int u = 0; u < ROWS; ++u) convert(share[u], kvt, b, u * 32 + pw * 8 + lr);
    kc::fence_proxy_async();  // the K/V tile is read by wgmma
    ws::mbar_arrive(mb_full + 8 * b);
#pragma unroll
    for (int u = 0; u < ROWS; ++u) {
      ecur[u] = enext[u];
      enext[u] = enext2[u];
    }
  }
}

template <class S>
KT_DEV void decode_body_ws(const Params& p) {
  constexpr Shape sh = WsTraits<S>::sh;
  constexpr int LAT = S::kLat, D = sh.dim, HG = S::kHeadsPerCta, TN = S::kTile;
  constexpr int ST = S::kStages, H = S::kNumHeads, TOPK = S::kTopk, NTILES = (TOPK + TN - 1) / TN;
  constexpr int COLS = LAT / 2;  // output columns per consumer warpgroup

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int g = lane >> 2, t4 = lane & 3;
  const int h0 = blockIdx.x * HG, split = blockIdx.y, token = blockIdx.z;
  const int per_split = (NTILES + p.num_splits - 1) / p.num_splits;
  const int t_begin = split * per_split;
  const int ntiles = max(0, min(NTILES, t_begin + per_split) - t_begin);

  extern __shared__ __align__(128) unsigned char smem[];  // offset 0 of the window: 1024-aligned
  const unsigned sb = kc::smem_u32(smem);
  const int* s_slot = reinterpret_cast<const int*>(smem + sh.off_slot);
  float* s_alpha = reinterpret_cast<float*>(smem + sh.off_stat);
  float* s_m = s_alpha + HG;
  float* s_l = s_m + HG;

  const unsigned mb_p_ready = sb + sh.off_bar + ws::kMbarPReady, mb_stats = sb + sh.off_bar + ws::kMbarStats;
  const unsigned mb_p_free = sb + sh.off_bar + ws::kMbarPFree, mb_full = sb + sh.off_bar + ws::kMbarFull;
  if (tid == 0) {
    kc::mbar_init(mb_p_ready, 128);
    kc::mbar_init(mb_stats, 128);
    kc::mbar_init(mb_p_free, 128);
#pragma unroll
    for (int b = 0; b < ST; ++b) kc::mbar_init(mb_full + 8 * b, 128);
  }
  // Q by every thread, published to wgmma before the roles split (the barrier also publishes the mbarriers).
  issue_q_tile<H, HG, D>(p, sb + sh.off_q, token, h0, tid, ws::kAll);
  kc::cp_async_commit();
  kc::cp_async_wait<0>();
  kc::fence_proxy_async();
  __syncthreads();

  if (wg == 2) {
    ws::regs_dec<ws::kRegsProducer>();
    produce_ws<S>(p, smem, t_begin, ntiles, token, warp - 8, lane);
    return;
  }

  float o[1][COLS / 8][4];
#pragma unroll
  for (int n = 0; n < COLS / 8; ++n) o[0][n][0] = o[0][n][1] = o[0][n][2] = o[0][n][3] = 0.f;
  const int r0 = 16 * (warp & 3) + g;  // this thread's O rows r0 and r0 + 8
  const unsigned sP = sb + sh.off_p;

  if (wg == 0) {
    ws::regs_inc<ws::kRegsQK>();
    const float scale_log2 = p.softmax_scale * kc::kLog2e;
    float m_run[2] = {kc::neg_inf(), kc::neg_inf()}, l_run[2] = {0.f, 0.f};
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
      const int b = it % ST;
      const unsigned sK = sb + sh.off_kv + b * sh.kv_tile_bytes;
      kc::mbar_wait(mb_full + 8 * b, (it / ST) & 1);
      float d[TN / 2];
      qk_wgmma_regs<HG, TN, TN, D>(d, sb + sh.off_q, sK, 0);
      if (it > 0) kc::mbar_wait(mb_p_free, (it - 1) & 1);  // warpgroup 1 is done with the last P
      float alpha[2];
      softmax_regs<HG, TN, TN, 1>(d, s_slot + b * TN, 0, r0, t4, scale_log2, m_run, l_run, alpha, nullptr,
                                  smem + sh.off_p);
      if (t4 == 0) {
        s_alpha[r0] = alpha[0];
        s_alpha[r0 + 8] = alpha[1];
      }
      kc::fence_proxy_async();  // P is read by wgmma of both warpgroups
      ws::mbar_arrive(mb_p_ready);
      kc::mbar_wait(mb_p_ready, it & 1);  // this warpgroup's own P V reads the rows of its other warps
      rescale_o_rows(o, alpha[0], alpha[1]);
      pv_wgmma<TN, COLS>(o, sP, sK, 0);
      if (it + ST < ntiles) ws::bar_arrive(ws::kBarEmpty + b, ws::kAll);
    }
    if (t4 == 0) {
      s_m[r0] = m_run[0];
      s_m[r0 + 8] = m_run[1];
      s_l[r0] = l_run[0];
      s_l[r0 + 8] = l_run[1];
    }
    ws::mbar_arrive(mb_stats);
  } else {
    ws::regs_dec<ws::kRegsPV>();
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
      const int b = it % ST;
      const unsigned sK = sb + sh.off_kv + b * sh.kv_tile_bytes;
      kc::mbar_wait(mb_full + 8 * b, (it / ST) & 1);
      kc::mbar_wait(mb_p_ready, it & 1);
      rescale_o_rows(o, s_alpha[r0], s_alpha[r0 + 8]);
      pv_wgmma<TN, COLS>(o, sP, sK, COLS);
      if (it + 1 < ntiles) ws::mbar_arrive(mb_p_free);
      if (it + ST < ntiles) ws::bar_arrive(ws::kBarEmpty + b, ws::kAll);
    }
  }
  kc::mbar_wait(mb_stats, 0);  // s_m / s_l from warpgroup 0
  kc::pdl_launch_dependents();  // the rows are consumed: the next kernel may take the SMs this grid frees
  write_output<S>(p, o, s_m, s_l, h0, token, split, 16 * (warp & 3), COLS * wg, g, t4, tid);
}

template <class S>
__global__ void __launch_bounds__(384, 1) decode_kernel_ws(const __grid_constant__ Params p) {
  kc::pdl_wait();  // every input may be written by the kernel before this one on the stream
  decode_body_ws<S>(p);
}

}  // namespace ktune_mla
