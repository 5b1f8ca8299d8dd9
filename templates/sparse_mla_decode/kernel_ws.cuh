// sparse_mla_decode, warp-specialized (config ".ws"): sm_90a, fp8_ds_mla cache, 64 heads per CTA, 64-slot tiles;
// a 16-head form (t64.s2.g16.ws, decode_body_ws16 below) shares the producer and the epilogue.
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
//            to shared memory for warpgroup 1, then O[:, 0 : LAT/2] += P V by wgmma with P from its own
//            registers (the accumulators are the register operand's fragments): it announces P and goes on
//            without waiting for its other warps' rows or for warpgroup 1 to take them.
//   warpgroup 1: O[:, LAT/2 : LAT] += P V by wgmma, with P and the factors warpgroup 0 left in shared memory.
// Warpgroup 0's Q K^T of tile i+1 runs on the tensor cores while warpgroup 1 finishes P V of tile i. A consumer
// warp skips the O rescale when all its rows' factors are 1 (the running max held; x * 1 = x, so the result is
// the same): 128 multiplies per thread and tile that would take issue slots from the producer.
// Two bf16 K/V buffers (stages = 2) fit next to Q and P: 64 x 576 x 2 B each; 226 KB in all.
// Hand-offs: the K/V buffer b full (the producer's 128 threads arrive, both consumer warpgroups wait), P free again
// (warpgroup 1 arrives, warpgroup 0 waits), P of a tile with its rescale factors ready (warpgroup 0 arrives, warpgroup
// 1 waits) and the rows' max and sum for the epilogue are mbarriers: each thread arrives with release after its stores,
// the readers wait with acquire on the phase. Only "buffer b empty" is a named barrier (the consumers' barrier.arrive,
// the producer's barrier.sync), because a producer polling an mbarrier takes issue slots from the consumers and its
// wait loop spills. The named barriers are the non-.aligned forms: bar.sync and bar.arrive mean barrier.sync.aligned /
// barrier.arrive.aligned, which require every thread to execute the same barrier instruction, and the roles reach each
// barrier from different code (compute-sanitizer's synccheck reports the .aligned forms here as divergent).
// Why mbarriers where a named barrier would order the same accesses: compute-sanitizer's racecheck follows an
// mbarrier's ordering in this kernel and not a named barrier's. With the factors, the slot lists or P handed over
// on named barriers it reported each read as a hazard against its store, and the kernel could not be checked
// (bench/dev/mla_ws_race_variants.cu keeps the variants that located this).
// Registers: ptxas fits every role within the launch bound's 168 per thread (warpgroup 0 holds 160 accumulator
// values: half of O and the scores). The setmaxnreg calls (208 / 160 / 136; paired 200 / 160 / 144) repartition
// the hardware allocation; they do not let ptxas give a role more than the bound (with 512 threads, a bound of
// 128, warpgroup 0 spilled 2.7 KB), but ptxas does keep a role's code within a lower count (the paired producer
// spilled at 136).
// Only one CTA fits an SM (226 KB of shared memory).
// Paired (decode_kernel_ws_pair, config ".wsp", 128 heads): the two head-group CTAs of a token are a
// cluster of two. Their K/V tiles are the same rows, so each CTA's producer loads and converts half of every tile
// and copies that half into the peer's buffer with cp.async.bulk (shared::cta to shared::cluster), completing on
// the peer's "full" mbarrier. Each producer thread then holds one row share instead of two, so it converts the
// share as soon as it lands, before it waits for a free buffer; what is left between the consumers' release and
// the next hand-off is the stores. On the H200 through the library: 5.6-5.8% faster at 64 and 128 tokens, even
// at 8 tokens with 8 splits (docs/sparse_mla_decode.md).
// Same results contract as decode_kernel: splits, sinks, LSE, -1 slots, checked slots, all-masked rows.
#pragma once

#include "common/cluster.cuh"
#include "common/tma.cuh"
#include "sparse_mla_decode/kernel.cuh"

namespace ktune_mla {

template <class S>
struct WsTraits {
  static constexpr Shape sh =
      make_shape(S::kLat, S::kRope, S::kFp8, S::kHeadsPerCta, S::kTile, S::kStages, 12, /*ws=*/true);
  static_assert(shape_error(sh) == nullptr, "invalid warp-specialized sparse_mla_decode shape (see shape_error)");
  static_assert(S::kNumHeads % S::kHeadsPerCta == 0, "heads per CTA must divide num_heads");
  // 16 heads per CTA: one consumer warpgroup (warpgroup 0) does all of a tile's attention and two producer
  // warpgroups take turns, each filling its own K/V buffer (decode_body_ws16).
  static constexpr bool kSolo = S::kHeadsPerCta == 16;
  static constexpr int kProducers = kSolo ? 2 : 1;
};

namespace ws {

// Named barrier ids (0 is __syncthreads): K/V buffer b empty (the consumer warpgroups arrive; the producer waits);
// 16 heads: the consumer warpgroup's own barrier (the rows' max exchange, P written).
// The mbarriers at Shape::off_bar (byte offsets below; Shape reserves 3 + 2 * stages of them):
//   P ready    128 arrivals of warpgroup 0, one phase per tile; warpgroup 1 waits with parity it & 1
//              (warpgroup 0 cannot complete the next phase before warpgroup 1 has released P: never a phase ahead);
//   stats      128 arrivals of warpgroup 0, one phase: the rows' max and sum;
//   P free     128 arrivals of warpgroup 1 after its P V of tile it (phase it); warpgroup 0 waits before
//              writing P of tile it + 1;
//   full b     128 arrivals of the producer per fill of buffer b (phase j / stages for tile j); the producer
//              cannot complete the next phase before the consumers released the buffer on "empty". Paired
//              kernel: also the bytes of the peer's half of the tile (one producer thread's arrival expects them).
//   peer free b  paired kernel only: one arrival per consumer warp of the peer CTA once it is done with its
//              buffer b (phase j / stages - 1 before the fill of tile j); the producer thread that copies this
//              CTA's half into the peer waits on it.
//   empty b    16 heads only (the slots of "peer free"): 128 arrivals of the consumer warpgroup once it is done
//              with buffer b, waited on by buffer b's producer (phase j / stages - 1 before the fill of tile j).
//              The consumer reads the buffer with ldmatrix, which racecheck tracks; it does not follow a named
//              barrier's ordering from those reads to the producer's next stores, and an mbarrier it does.
enum : int { kBarConsumer = 1, kBarEmpty = 3, kBarHalfStored = 3 + 4 };  // kBarEmpty + b: buffer b < stages (<= 4)
enum : int { kMbarPReady = 0, kMbarStats = 8, kMbarPFree = 16, kMbarFull = 24 };
template <int ST>
constexpr int kMbarPeerFree = kMbarFull + 8 * ST;
template <int ST>
constexpr int kMbarEmpty16 = kMbarPeerFree<ST>;
constexpr int kAll = 384;
// The counts add up to the launch's 3 x 168: a warpgroup's setmaxnreg.inc waits until the others' .dec have
// released enough of the CTA's registers. Paired, a producer thread holds a converted row share (72 registers);
// ptxas keeps the producer's code within its count, and at 136 it spilled, so the paired kernel moves 8 per
// thread from warpgroup 0 (200 is still enough for it: no spills) to the producer (144).
constexpr int kRegsQK = 208, kRegsPV = 160, kRegsProducer = 136;
constexpr int kRegsQKPaired = 200, kRegsProducerPaired = 144;
static_assert(kRegsQK + kRegsPV + kRegsProducer == 3 * 168 && kRegsQKPaired + kRegsPV + kRegsProducerPaired == 3 * 168,
              "setmaxnreg counts must add up to the launch bound's 168 per thread");

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
// kPair (decode_kernel_ws_pair): the CTA of cluster rank c loads and converts only rows c * 32 .. c * 32 + 31 of
// every tile (row c * 32 + pw * 8 + lr) and copies them (and their slots) into the same buffer of the peer CTA,
// which does the other half. With half the items per thread, a tile's rows are converted into registers as soon
// as they land, before the wait for a free buffer; only the stores remain between that wait and the hand-off.
// kSolo (16 heads): producer pi of the two fills tiles pi, pi + 2, ... into buffer pi; the consumer reads the
// buffer with ldmatrix (generic proxy), so no proxy fence precedes a hand-off.
template <class S, bool kPair>
KT_DEV void produce_ws(const Params& p, unsigned char* smem, int t_begin, int ntiles, int token, int pw, int lane,
                       int pi = 0) {
  constexpr Shape sh = WsTraits<S>::sh;
  constexpr int LAT = S::kLat, TN = S::kTile, ST = S::kStages, TOPK = S::kTopk, RB = sh.raw_bytes;
  constexpr int ROWS = kPair ? 1 : TN / 32, LPT = LAT / 16 / 4, RPT = S::kRope / 8 / 4, NSC = LAT / 128;
  static_assert(NSC <= 4 && LPT * 4 * 16 == LAT && RPT * 4 * 8 == S::kRope, "row split of the producer");
  static_assert(!kPair || TN == 64, "a pair: 64-row tiles in halves of 32 rows");
  constexpr int kHalfBytes = (S::kLat + S::kRope) / 64 * 32 * 128 + 32 * 4;  // a half tile and its slots
  constexpr int NP = WsTraits<S>::kProducers;
  static_assert(NP == 1 || (NP == ST && !kPair), "two producers: one buffer each, unpaired");
  const int lm = lane >> 3, lr = lane & 7;
  const int* idx = p.indices + (long long)token * TOPK;
  const char* kvb = static_cast<const char*>(p.kv_cache);
  int* s_slot = reinterpret_cast<int*>(smem + sh.off_slot);
  const unsigned sb = kc::smem_u32(smem);
  const unsigned mb_full = sb + sh.off_bar + ws::kMbarFull;
  const unsigned rank = kPair ? kc::cluster_rank() : 0u;
  const bool copier = kPair && pw == 0 && lane == 0;
  auto row_of = [&](int u) { return kPair ? int(rank) * 32 + pw * 8 + lr : u * 32 + pw * 8 + lr; };
  // Raw top-k entry of row u of local tile j (-1 past the split's tiles or past topk), loaded tiles ahead.
  auto entry = [&](int j, int u) {
    const int pos = (t_begin + j) * TN + row_of(u);
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
  // Paired: convert first, into registers (the latent items' bf16 chunks, two each, then the rope items), ...
  constexpr int kChunks = 2 * LPT + RPT;
  auto dequant_share = [&](const RowShare<LPT, RPT>& sh_, uint4 (&cv)[kChunks]) {
    const float sc[4] = {__uint_as_float(sh_.scale.x), __uint_as_float(sh_.scale.y), __uint_as_float(sh_.scale.z),
                         __uint_as_float(sh_.scale.w)};
#pragma unroll
    for (int k = 0; k < LPT; ++k)
      dequant_item(RawItem{sh_.lat[k], sc[(lm + 4 * k) >> 3] * kc::kE4m3Fold}, cv[2 * k], cv[2 * k + 1]);
#pragma unroll
    for (int k = 0; k < RPT; ++k) cv[2 * LPT + k] = sh_.rope[k];
  };
  // ... then store them into row r of kvt, with the row's slot (store_item's places).
  auto store_share = [&](const uint4 (&cv)[kChunks], int slot, unsigned char* kvt, int b, int r) {
#pragma unroll
    for (int k = 0; k < LPT; ++k) {
      const int c = lm + 4 * k;
      *reinterpret_cast<uint4*>(kvt + tile_off(TN, r, 2 * c)) = cv[2 * k];
      *reinterpret_cast<uint4*>(kvt + tile_off(TN, r, 2 * c + 1)) = cv[2 * k + 1];
    }
#pragma unroll
    for (int k = 0; k < RPT; ++k)
      *reinterpret_cast<uint4*>(kvt + tile_off(TN, r, LAT / 8 + lm + 4 * k)) = cv[2 * LPT + k];
    if (lm == 0) s_slot[b * TN + r] = slot;
  };
  // A tile's loads are issued at the top of its iteration, just after the last tile was handed over, so they
  // are in flight while the producer waits for a free buffer. (The proxy fence before a hand-off is a MEMBAR in
  // SASS, which would wait for any load in flight, so issuing the next tile's loads before it is slower; so is
  // an L2 prefetch of the rows 1-3 tiles ahead.)
  int ecur[ROWS], enext[ROWS];  // entries of this thread's next two tiles (loaded a tile ahead of their use)
#pragma unroll
  for (int u = 0; u < ROWS; ++u) {
    ecur[u] = entry(pi, u);
    enext[u] = entry(pi + NP, u);
  }
#pragma unroll 1
  for (int j = pi; j < ntiles; j += NP) {
    const int b = j % ST;
    RowShare<LPT, RPT> share[ROWS];
    int enext2[ROWS];
#pragma unroll
    for (int u = 0; u < ROWS; ++u) issue(share[u], ecur[u]);
#pragma unroll
    for (int u = 0; u < ROWS; ++u) enext2[u] = entry(j + 2 * NP, u);
    uint4 cv[kChunks];  // paired: the converted row, ahead of the wait for a free buffer
    if constexpr (kPair) dequant_share(share[0], cv);
    if (j >= ST) {  // the consumers are done with tile j - ST
      if constexpr (WsTraits<S>::kSolo) {
        kc::mbar_wait(sb + sh.off_bar + ws::kMbarEmpty16<ST> + 8 * b, (j / ST - 1) & 1);
      } else {
        if (copier) kc::bulk_wait_read<ST - 1>();  // the copy of tile j - ST out of buffer b has read it
        ws::bar_sync(ws::kBarEmpty + b, ws::kAll);
      }
    }
    unsigned char* kvt = smem + sh.off_kv + b * sh.kv_tile_bytes;
    if constexpr (kPair) {
      store_share(cv, share[0].slot, kvt, b, row_of(0));
    } else {
#pragma unroll
      for (int u = 0; u < ROWS; ++u) convert(share[u], kvt, b, row_of(u));
    }
    if constexpr (!WsTraits<S>::kSolo) kc::fence_proxy_async();  // the tile is read by wgmma (paired: bulk copy)
    if constexpr (kPair) {
      ws::bar_sync(ws::kBarHalfStored, 128);  // every row of this half is stored and fenced
      if (copier) {
        // This CTA's "full b" also waits for the peer's half (this arrival is one of the 128). Then, once
        // the peer's consumers are done with its buffer b (tile j - ST): this half (32 rows of each 64-dim block,
        // 4 KB each, and its 32 slots) into the same place of the peer's buffer, completing on its "full b".
        kc::mbar_arrive_expect_tx(mb_full + 8 * b, kHalfBytes);
        if (j >= ST) kc::mbar_wait_cluster(sb + sh.off_bar + ws::kMbarPeerFree<ST> + 8 * b, (j / ST - 1) & 1);
        const unsigned peer = rank ^ 1u, bar = kc::peer_addr(mb_full + 8 * b, peer);
        const unsigned kv = sb + sh.off_kv + b * sh.kv_tile_bytes + rank * 32 * 128;
#pragma unroll 1
        for (int blk = 0; blk < sh.dim / 64; ++blk)
          kc::bulk_copy_to_peer(kc::peer_addr(kv + blk * TN * 128, peer), kv + blk * TN * 128, 32 * 128, bar);
        const unsigned slots = sb + sh.off_slot + (b * TN + rank * 32) * 4;
        kc::bulk_copy_to_peer(kc::peer_addr(slots, peer), slots, 32 * 4, bar);
        kc::bulk_commit();
      } else {
        ws::mbar_arrive(mb_full + 8 * b);
      }
    } else {
      ws::mbar_arrive(mb_full + 8 * b);
    }
#pragma unroll
    for (int u = 0; u < ROWS; ++u) {
      ecur[u] = enext[u];
      enext[u] = enext2[u];
    }
  }
  if (copier) kc::bulk_wait_read<0>();  // shared memory stays until the last copy has read it
}

// 16 heads per CTA (config t64.s2.g16.ws; tensor-parallel shards of 128 heads). Each cache row serves only 16
// heads here, so loading and converting the rows is most of the work and the attention is small. Warpgroups 1
// and 2 are producers that take turns, each filling its own K/V buffer from registers (produce_ws), so two
// tiles' row loads can be in flight while warpgroup 0 runs the attention of a third. Warpgroup 0, four warps on
// mma.sync, consumes the two buffers in turn:
//   S = Q K^T: split along k: warp w takes k steps w * D / 64 .. of all 64 slots (eight 16x8 score blocks, chains
//             of D / 64 mma), with its quarter of Q held in registers for the whole split, so Q is read from
//             shared memory once per CTA rather than once per tile and warp (74 KB a tile at D = 576, a third of
//             the consumer's shared-memory reads; the consumer's shared-memory latency is what the producers' work
//             stretches). The four partial score tiles meet in shared memory (one barrier), each warp adding up
//             the four for its slots 16 w .. 16 w + 15 in warp order;
//   softmax:  on the accumulators; the rows' max over the four warps' slots through s_pmax and one barrier of
//             the warpgroup; each warp keeps the sums of its own slots (added up in the epilogue);
//   P V:      warp w owns output columns w * LAT / 4 .. for all 16 heads, P from shared memory (written by all
//             four warps, one more barrier), V by ldmatrix.trans from the bf16 tile.
// Then the buffer goes back to its producer (the mbarrier "empty b").
template <class S>
KT_DEV void decode_body_ws16(const Params& p) {
  constexpr Shape sh = WsTraits<S>::sh;
  constexpr int LAT = S::kLat, D = sh.dim, HG = S::kHeadsPerCta, TN = S::kTile;
  constexpr int H = S::kNumHeads, TOPK = S::kTopk, NTILES = (TOPK + TN - 1) / TN;
  constexpr int NB = S::kStages;             // two K/V buffers, one per producer
  constexpr int CW = LAT / 4, PCH = TN / 8;  // output columns per consumer warp; 16-byte chunks of a P row
  constexpr int KS = D / 64;                  // k16 steps of Q K^T per consumer warp
  static_assert(HG == 16 && TN == 64 && NB == 2 && CW % 16 == 0 && D % 64 == 0, "16-head warp-specialized shape");

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int g = lane >> 2, t4 = lane & 3, lr = lane & 7, lm = lane >> 3;
  const int h0 = blockIdx.x * HG, split = blockIdx.y, token = blockIdx.z;
  const SplitTiles tiles = split_tiles<NTILES>(p, split);
  const int t_begin = tiles.t_begin, ntiles = tiles.ntiles;

  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sb = kc::smem_u32(smem);
  const int* s_slot = reinterpret_cast<const int*>(smem + sh.off_slot);
  float* s_m = reinterpret_cast<float*>(smem + sh.off_stat) + HG;
  float* s_l = s_m + HG;
  float* s_pmax = reinterpret_cast<float*>(smem + sh.off_s);  // [warp][row]
  float* s_lpart = s_pmax + 4 * HG;                           // [warp][row]
  const unsigned mb_full = sb + sh.off_bar + ws::kMbarFull, mb_empty = sb + sh.off_bar + ws::kMbarEmpty16<NB>;
  if (tid == 0)
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      kc::mbar_init(mb_full + 8 * b, 128);  // the producer that fills buffer b
      kc::mbar_init(mb_empty + 8 * b, 128);
    }
  issue_q_tile<H, HG, D>(p, sb + sh.off_q, token, h0, tid, ws::kAll);
  kc::cp_async_commit();
  kc::cp_async_wait<0>();
  __syncthreads();  // Q and the mbarriers, before the roles split

  if (wg > 0) {
    produce_ws<S, false>(p, smem, t_begin, ntiles, token, warp - 4 * wg, lane, wg - 1);
    return;
  }
  const auto consumer_sync = [] { ws::bar_sync(ws::kBarConsumer, 128); };
  const unsigned sQ = sb + sh.off_q, sP = sb + sh.off_p;
  const float scale_log2 = p.softmax_scale * kc::kLog2e;
  float o[1][CW / 8][4];
#pragma unroll
  for (int n = 0; n < CW / 8; ++n) o[0][n][0] = o[0][n][1] = o[0][n][2] = o[0][n][3] = 0.f;
  float m_run[2] = {kc::neg_inf(), kc::neg_inf()}, l_run[2] = {0.f, 0.f};  // rows g, g + 8
  unsigned qf[KS][4];  // this warp's k steps of Q (A fragments), for every tile
#pragma unroll
  for (int i = 0; i < KS; ++i)
    kc::ldmatrix_x4(qf[i], sQ + tile_off(HG, (lm & 1) * 8 + lr, 2 * (KS * warp + i) + (lm >> 1)));
  // Partial scores, [warp][score block][row half][lane]: each lane's float2 at the same place in every warp's part.
  float2* s_part = reinterpret_cast<float2*>(smem + sh.off_part);

#pragma unroll 1
  for (int it = 0; it < ntiles; ++it) {
    const int b = it % NB;
    const unsigned sK = sb + sh.off_kv + b * sh.kv_tile_bytes;
    kc::mbar_wait(mb_full + 8 * b, (it / NB) & 1);

    // ---- S = Q K^T over this warp's k steps, all 64 slots (in two halves of 32: registers); then the four parts
    // ---- of this warp's 16 slots ----
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      float acc[TN / 16][4];
#pragma unroll
      for (int n = 0; n < TN / 16; ++n) acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.f;
#pragma unroll
      for (int i = 0; i < KS; ++i) {
        // k step ks = KS * warp + i; the four matrices (slots 16 pr + 0..7 | 8..15) x (chunks 2 ks | 2 ks + 1) are
        // b0, b1 of score blocks 2 pr and 2 pr + 1
        const unsigned k_addr = sK + tile_off(TN, 8 * (lm >> 1) + lr, 2 * (KS * warp + i) + (lm & 1));
#pragma unroll
        for (int pr = 0; pr < TN / 32; ++pr) {
          unsigned bf[4];
          kc::ldmatrix_x4(bf, k_addr + (half * TN / 32 + pr) * 16 * 128);
          kc::mma_16816<true>(acc[2 * pr], qf[i], bf[0], bf[1]);
          kc::mma_16816<true>(acc[2 * pr + 1], qf[i], bf[2], bf[3]);
        }
      }
#pragma unroll
      for (int n = 0; n < TN / 16; ++n)
#pragma unroll
        for (int h = 0; h < 2; ++h)
          s_part[((warp * (TN / 8) + half * TN / 16 + n) * 2 + h) * 32 + lane] =
              make_float2(acc[n][2 * h], acc[n][2 * h + 1]);
    }
    consumer_sync();  // every warp's part
    float d[8];
#pragma unroll
    for (int n = 0; n < 2; ++n)
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float2 sum = s_part[((2 * warp + n) * 2 + h) * 32 + lane];
#pragma unroll
        for (int w = 1; w < 4; ++w) {
          const float2 v = s_part[((w * (TN / 8) + 2 * warp + n) * 2 + h) * 32 + lane];
          sum.x += v.x;
          sum.y += v.y;
        }
        d[4 * n + 2 * h] = sum.x;
        d[4 * n + 2 * h + 1] = sum.y;
      }

    // ---- online softmax; P (all four warps' slots) to shared memory ----
    float alpha[2];
    softmax_regs<HG, TN, 16, 4>(d, s_slot + b * TN, warp, g, t4, scale_log2, m_run, l_run, alpha, s_pmax,
                                smem + sh.off_p, consumer_sync);
    consumer_sync();  // P complete

    // ---- O = O * alpha + P V (this warp's columns) ----
    rescale_o_rows(o, alpha[0], alpha[1]);
#pragma unroll
    for (int kk = 0; kk < TN / 16; ++kk) {
      unsigned pa[4];
      {
        const int row = (lm & 1) * 8 + lr, ch = 2 * kk + (lm >> 1);
        kc::ldmatrix_x4(pa, sP + (row * PCH + swzp<PCH>(row, ch)) * 16);
      }
#pragma unroll
      for (int nq = 0; nq < CW / 16; ++nq) {
        unsigned v[4];
        kc::ldmatrix_x4_trans(v, sK + tile_off(TN, kk * 16 + (lm & 1) * 8 + lr, warp * CW / 8 + 2 * nq + (lm >> 1)));
        kc::mma_16816<true>(o[0][2 * nq], pa, v[0], v[1]);
        kc::mma_16816<true>(o[0][2 * nq + 1], pa, v[2], v[3]);
      }
    }
    if (it + NB < ntiles) ws::mbar_arrive(mb_empty + 8 * b);
  }

  // ---- epilogue: the rows' max (the same in every warp) and sums (added over the warps) ----
  if (t4 == 0) {
    s_lpart[warp * HG + g] = l_run[0];
    s_lpart[warp * HG + g + 8] = l_run[1];
    if (warp == 0) {
      s_m[g] = m_run[0];
      s_m[g + 8] = m_run[1];
    }
  }
  consumer_sync();
  if (tid < HG) s_l[tid] = s_lpart[tid] + s_lpart[HG + tid] + s_lpart[2 * HG + tid] + s_lpart[3 * HG + tid];
  consumer_sync();
  kc::pdl_launch_dependents();  // the rows are consumed: the next kernel may take the SMs this grid frees
  write_output<S>(p, o, s_m, s_l, h0, token, split, 0, warp * CW, g, t4, tid);
}

template <class S, bool kPair>
KT_DEV void decode_body_ws(const Params& p) {
  constexpr Shape sh = WsTraits<S>::sh;
  constexpr int LAT = S::kLat, D = sh.dim, HG = S::kHeadsPerCta, TN = S::kTile;
  constexpr int ST = S::kStages, H = S::kNumHeads, TOPK = S::kTopk, NTILES = (TOPK + TN - 1) / TN;
  constexpr int COLS = LAT / 2;  // output columns per consumer warpgroup

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int g = lane >> 2, t4 = lane & 3;
  const int h0 = blockIdx.x * HG, split = blockIdx.y, token = blockIdx.z;
  const SplitTiles tiles = split_tiles<NTILES>(p, split);
  const int t_begin = tiles.t_begin, ntiles = tiles.ntiles;

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
    if constexpr (kPair)
#pragma unroll
      for (int b = 0; b < ST; ++b) kc::mbar_init(sb + sh.off_bar + ws::kMbarPeerFree<ST> + 8 * b, 8);
  }
  // Q by every thread, published to wgmma before the roles split (the barrier also publishes the mbarriers; paired,
  // to the peer CTA too, before either signals the other's).
  issue_q_tile<H, HG, D>(p, sb + sh.off_q, token, h0, tid, ws::kAll);
  kc::cp_async_commit();
  kc::cp_async_wait<0>();
  kc::fence_proxy_async();
  if constexpr (kPair)
    kc::cluster_sync();
  else
    __syncthreads();

  if (wg == 2) {
    ws::regs_dec<kPair ? ws::kRegsProducerPaired : ws::kRegsProducer>();
    produce_ws<S, kPair>(p, smem, t_begin, ntiles, token, warp - 8, lane);
    return;
  }
  // A consumer warp is done with buffer b (its wgmma have completed): the producer may refill it, and paired, the
  // peer's producer may copy its half in (an arrival on the peer's "peer free b"; its address is formed here rather
  // than held through the loop, where warpgroup 0 has no register to spare).
  auto release = [&](int b) {
    ws::bar_arrive(ws::kBarEmpty + b, ws::kAll);
    if constexpr (kPair) {
      __syncwarp();
      if (lane == 0)
        kc::mbar_arrive_remote(kc::peer_addr(sb + sh.off_bar + ws::kMbarPeerFree<ST> + 8 * b, kc::cluster_rank() ^ 1u));
    }
  };

  float o[1][COLS / 8][4];
#pragma unroll
  for (int n = 0; n < COLS / 8; ++n) o[0][n][0] = o[0][n][1] = o[0][n][2] = o[0][n][3] = 0.f;
  const int r0 = 16 * (warp & 3) + g;  // this thread's O rows r0 and r0 + 8
  const unsigned sP = sb + sh.off_p;

  if (wg == 0) {
    ws::regs_inc<kPair ? ws::kRegsQKPaired : ws::kRegsQK>();
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
      kc::fence_proxy_async();  // P in shared memory is read by warpgroup 1's wgmma
      ws::mbar_arrive(mb_p_ready);
      rescale_o_rows(o, alpha[0], alpha[1]);
      pv_wgmma_regs<TN, COLS>(o, d, sK, 0);  // P from this thread's registers: no wait for the other warps' rows
      if (it + ST < ntiles) release(b);
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
      if (it + ST < ntiles) release(b);
    }
  }
  kc::mbar_wait(mb_stats, 0);  // s_m / s_l from warpgroup 0
  kc::pdl_launch_dependents();  // the rows are consumed: the next kernel may take the SMs this grid frees
  write_output<S>(p, o, s_m, s_l, h0, token, split, 16 * (warp & 3), COLS * wg, g, t4, tid);
}

template <class S>
__global__ void __launch_bounds__(384, 1) decode_kernel_ws(const __grid_constant__ Params p) {
  kc::pdl_wait();  // every input may be written by the kernel before this one on the stream
  if constexpr (WsTraits<S>::kSolo)
    decode_body_ws16<S>(p);
  else
    decode_body_ws<S, false>(p);
}

// The two head groups of a token (blockIdx.x 2i and 2i + 1) as a cluster that shares the loading and conversion
// of every K/V tile: each CTA does half of the rows and copies them into the other's buffer.
template <class S>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(384, 1) decode_kernel_ws_pair(const __grid_constant__ Params p) {
  kc::pdl_wait();
  decode_body_ws<S, true>(p);
}

}  // namespace ktune_mla
