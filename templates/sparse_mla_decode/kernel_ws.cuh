// sparse_mla_decode, warp-specialized (config ".ws"): sm_90a, fp8_ds_mla cache, 64 heads per CTA, 64-slot tiles;
// a 16-head form (t64.s2.g16.ws, decode_body_ws16 below) shares the producer.
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
// Two bf16 K/V buffers (stages = 2) fit next to Q and P: 64 x 576 x 2 B each; 226 KB in all. At one split the
// epilogue stages the bf16 rows where Q was and stores them as whole rows (write_rows_staged).
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
// 16 heads: the consumer warpgroup's own barrier (the heads' max exchange, P written).
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
//   empty b    16 heads only (the slots of "peer free"): 128 arrivals of the consumer warpgroup once its wgmma
//              are done with buffer b, waited on by buffer b's producer (phase j / stages - 1 before the fill of
//              tile j). The producer waits on an mbarrier, as for "full", rather than a named barrier: the
//              consumer's reads of the tile's slot list are generic, and racecheck follows an mbarrier's ordering
//              from them to the producer's next stores, not a named barrier's.
// 64 heads: the two consumer warpgroups' epilogue barrier (the staged rows written).
enum : int { kBarConsumer = 1, kBarEpilogue = 2, kBarEmpty = 3, kBarHalfStored = 3 + 4 };  // kBarEmpty + b: b < 4
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
// kSolo (16 heads): producer pi of the two fills tiles pi, pi + 2, ... into buffer pi.
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
  // Unpaired, a tile's loads are issued at the top of its iteration, just after the last tile was handed over,
  // so they are in flight while the producer waits for a free buffer. Paired, the next tile's loads are issued
  // right after this tile's stores, so they are also in flight through the hand-off (the half-tile barrier and,
  // in the copier's warp, the wait for the peer's buffer and the copy): about 4% faster at 64 and 128 tokens than
  // issuing them after it. The proxy fence does not wait for them to land (its MEMBAR.ALL.CTA holds the thread's
  // next shared-memory access a few hundred cycles while a load is in flight: bench/dev/proxy_fence_probe.cu).
  // Issued before the wait for a free buffer, while the converted row is still held, they are slower; so is an
  // L2 prefetch by the producer of the rows 1-3 tiles ahead (paired, a consumer warp prefetches: PairRowPrefetch).
  int ecur[ROWS], enext[ROWS];  // entries of this thread's next two tiles (loaded a tile ahead of their use)
#pragma unroll
  for (int u = 0; u < ROWS; ++u) {
    ecur[u] = entry(pi, u);
    enext[u] = entry(pi + NP, u);
  }
  RowShare<LPT, RPT> share[ROWS];
  if constexpr (kPair) issue(share[0], ecur[0]);  // paired: each later tile's loads follow the last one's stores
#pragma unroll 1
  for (int j = pi; j < ntiles; j += NP) {
    const int b = j % ST;
    int enext2[ROWS];
    if constexpr (!kPair) {
#pragma unroll
      for (int u = 0; u < ROWS; ++u) issue(share[u], ecur[u]);
    }
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
      issue(share[0], enext[0]);  // the next tile (an entry of -1 past the split's tiles loads nothing)
    } else {
#pragma unroll
      for (int u = 0; u < ROWS; ++u) convert(share[u], kvt, b, row_of(u));
    }
    kc::fence_proxy_async();  // the tile is read by wgmma (paired: and by the bulk copy)
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
// tiles' row loads can be in flight while warpgroup 0 runs the attention of a third. Warpgroup 0 runs it on
// wgmma with the 64-head kernel's roles swapped: the tile's 64 slots are the M side and the 16 heads the N side,
// so the tensor cores read K and V straight from the producer's buffer and no consumer warp spends issue slots
// or registers on loading them (on mma.sync, ldmatrix of K, V and Q was most of the consumer's work):
//   S^T = K Q^T      m64n16k16, A = the K/V tile (K-major), B = Q (K-major), D / 16 steps: warp w holds the
//                    scores of slots 16 w .. 16 w + 15 for all 16 heads (the accumulator layout of common/wgmma.cuh
//                    with rows = slots, columns = heads);
//   softmax          per head over the tile's 64 slots: the max within a warp by shuffles, over the four warps
//                    through s_pmax and one barrier of the warpgroup; each thread keeps the sums of its own slots
//                    (added up in the epilogue); P^T (bf16, a K-major [head][slot] operand) to shared memory;
//   O^T += V^T P^T   m64n16k16 per 64 output columns, A = the tile's latent part read MN-major (transposed), B = P.
// Then the buffer goes back to its producer (the mbarrier "empty b"). O^T (output columns x heads, LAT / 8 fp32
// per thread) goes through shared memory in the epilogue, so the output and the partials are stored as whole rows.
template <class S>
KT_DEV void decode_body_ws16(const Params& p) {
  constexpr Shape sh = WsTraits<S>::sh;
  constexpr int LAT = S::kLat, D = sh.dim, HG = S::kHeadsPerCta, TN = S::kTile;
  constexpr int H = S::kNumHeads, TOPK = S::kTopk, NTILES = (TOPK + TN - 1) / TN;
  constexpr int NB = S::kStages;  // two K/V buffers, one per producer
  constexpr int MB = LAT / 64;    // 64-column blocks of O^T (the M of its wgmma)
  constexpr int OS = LAT + 4;     // floats per head row of the staged O (the padding spreads a warp's stores)
  constexpr int VPT = LAT / 128;  // output columns per thread in the epilogue
  static_assert(HG == 16 && TN == 64 && NB == 2 && D % 64 == 0 && LAT % 128 == 0, "16-head warp-specialized shape");
  static_assert(HG * OS * 4 <= sh.kv_tile_bytes, "the staged O fits a K/V buffer");

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int g = lane >> 2, t4 = lane & 3;
  const int h0 = blockIdx.x * HG, split = blockIdx.y, token = blockIdx.z;
  const SplitTiles tiles = split_tiles<NTILES>(p, split);
  const int t_begin = tiles.t_begin, ntiles = tiles.ntiles;

  extern __shared__ __align__(128) unsigned char smem[];  // offset 0 of the window: 1024-aligned
  const unsigned sb = kc::smem_u32(smem);
  const int* s_slot = reinterpret_cast<const int*>(smem + sh.off_slot);
  float* s_m = reinterpret_cast<float*>(smem + sh.off_stat);  // per head: max, sum, the output's scale
  float* s_l = s_m + HG;
  float* s_fin = s_l + HG;
  float* s_pmax = reinterpret_cast<float*>(smem + sh.off_s);  // [tile parity][warp][head] (one copy would do)
  float* s_lpart = s_pmax + 2 * 4 * HG;                       // [warp][head]
  const unsigned mb_full = sb + sh.off_bar + ws::kMbarFull, mb_empty = sb + sh.off_bar + ws::kMbarEmpty16<NB>;
  if (tid == 0)
#pragma unroll
    for (int b = 0; b < NB; ++b) {
      kc::mbar_init(mb_full + 8 * b, 128);  // the producer that fills buffer b
      kc::mbar_init(mb_empty + 8 * b, 128);
    }
  // Q by every thread, published to wgmma before the roles split (the barrier also publishes the mbarriers).
  issue_q_tile<H, HG, D>(p, sb + sh.off_q, token, h0, tid, ws::kAll);
  kc::cp_async_commit();
  kc::cp_async_wait<0>();
  kc::fence_proxy_async();
  __syncthreads();

  if (wg > 0) {
    produce_ws<S, false>(p, smem, t_begin, ntiles, token, warp - 4 * wg, lane, wg - 1);
    return;
  }
  const auto consumer_sync = [] { ws::bar_sync(ws::kBarConsumer, 128); };
  const float scale_log2 = p.softmax_scale * kc::kLog2e;
  const unsigned long long dq = kc::wg_desc_k128(sb + sh.off_q), dp = kc::wg_desc_k128(sb + sh.off_p);
  unsigned char* p_tile = smem + sh.off_p;
  // This thread's accumulators hold slots (S^T) or output columns (O^T) 16 warp + g (+ 8) and heads
  // head_of(c) = 8 (c / 2) + 2 t4 + c % 2 for c < 4, at d[4 (c / 2) + c % 2] (+ 2 for the row + 8).
  auto head_of = [&](int c) { return 8 * (c >> 1) + 2 * t4 + (c & 1); };
  float o[MB][8];
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int r = 0; r < 8; ++r) o[i][r] = 0.f;
  float m_run[4], l_run[4];  // per head c: the running max (the same in every thread) and this thread's sum
#pragma unroll
  for (int c = 0; c < 4; ++c) m_run[c] = kc::neg_inf(), l_run[c] = 0.f;
  const int sl0 = 16 * warp + g;  // this thread's slots sl0 and sl0 + 8 of every tile

#pragma unroll 1
  for (int it = 0; it < ntiles; ++it) {
    const int b = it % NB;
    const unsigned sK = sb + sh.off_kv + b * sh.kv_tile_bytes;
    kc::mbar_wait(mb_full + 8 * b, (it / NB) & 1);

    // ---- S^T = K Q^T ----
    float s[8];
#pragma unroll
    for (int r = 0; r < 8; ++r) s[r] = 0.f;
    kc::wg_fence();
    const unsigned long long dk = kc::wg_desc_k128(sK);
#pragma unroll  // (with this loop rolled, ptxas serializes the wgmma: its warning C7520)
    for (int kb = 0; kb < D / 64; ++kb)
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        kc::wgmma_ss<HG, true, false>(s, dk + (unsigned)((kb * TN * 128 + kk * 32) >> 4),
                                      dq + (unsigned)((kb * HG * 128 + kk * 32) >> 4), (kb | kk) != 0);
    kc::wg_commit();
    kc::wg_wait<0>();
    kc::wg_hold(s);

    // ---- online softmax per head over the tile's slots ----
    const int* slots = s_slot + b * TN;
    const bool masked[2] = {slots[sl0] < 0, slots[sl0 + 8] < 0};
    float mx[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      mx[c] = kc::neg_inf();
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        float& v = s[4 * (c >> 1) + 2 * h + (c & 1)];
        v = masked[h] ? kc::neg_inf() : v * scale_log2;
        mx[c] = fmaxf(mx[c], v);
      }
#pragma unroll
      for (int x = 4; x < 32; x <<= 1) mx[c] = fmaxf(mx[c], __shfl_xor_sync(0xffffffffu, mx[c], x));
    }
    float* pmax = s_pmax + (it & 1) * 4 * HG;
    if (g == 0)
#pragma unroll
      for (int c = 0; c < 4; ++c) pmax[warp * HG + head_of(c)] = mx[c];
    consumer_sync();  // every warp's max; also: every warp's P V of the last tile has completed (P is free)
    float alpha[4];
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      const int hd = head_of(c);
      const float tile_max = fmaxf(fmaxf(pmax[hd], pmax[HG + hd]), fmaxf(pmax[2 * HG + hd], pmax[3 * HG + hd]));
      const kc::MaxStep st = kc::online_max_step(m_run[c], fmaxf(m_run[c], tile_max));
      alpha[c] = st.alpha;
      float sum = 0.f;
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 4 * (c >> 1) + 2 * h + (c & 1), slot = sl0 + 8 * h;
        s[r] = kc::fast_exp2(s[r] - st.m_use);
        sum += s[r];
        *reinterpret_cast<unsigned short*>(p_tile + hd * 128 + (((slot >> 3) ^ (hd & 7)) << 4) + (slot & 7) * 2) =
            kc::float_to_bf16(s[r]);
      }
      l_run[c] = l_run[c] * alpha[c] + sum;
    }
    kc::fence_proxy_async();  // P is read by wgmma
    consumer_sync();          // P complete

    // ---- O^T = O^T * alpha + V^T P^T ----
    if (__any_sync(0xffffffffu, alpha[0] != 1.f || alpha[1] != 1.f || alpha[2] != 1.f || alpha[3] != 1.f)) {
#pragma unroll
      for (int i = 0; i < MB; ++i)
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          o[i][4 * (c >> 1) + (c & 1)] *= alpha[c];
          o[i][4 * (c >> 1) + 2 + (c & 1)] *= alpha[c];
        }
    }
    kc::wg_fence();
#pragma unroll
    for (int kk = 0; kk < TN / 16; ++kk)
#pragma unroll
      for (int i = 0; i < MB; ++i)
        kc::wgmma_ss<HG, true, false, true>(o[i], kc::wg_desc_mn(sK + i * TN * 128 + kk * 16 * 128, TN * 128, 1024),
                                            dp + (unsigned)((kk * 32) >> 4), 1);
    kc::wg_commit();
    kc::wg_wait<0>();
#pragma unroll
    for (int i = 0; i < MB; ++i) kc::wg_hold(o[i]);
    if (it + NB < ntiles) ws::mbar_arrive(mb_empty + 8 * b);
  }

  // ---- epilogue: the heads' sums over every thread's slots; O^T through shared memory as [head][column], in
  // ---- K/V buffer 0: the producers store nothing after the last tile's hand-off, and the barrier below waits
  // ---- for every warp's last P V (a warp's wgmma.wait_group covers its own wgmma only; the last tile's V may
  // ---- sit in buffer 0) ----
#pragma unroll
  for (int c = 0; c < 4; ++c) {
    float l = l_run[c];
#pragma unroll
    for (int x = 4; x < 32; x <<= 1) l += __shfl_xor_sync(0xffffffffu, l, x);
    if (g == 0) {
      s_lpart[warp * HG + head_of(c)] = l;
      if (warp == 0) s_m[head_of(c)] = m_run[c];
    }
  }
  float* s_o = reinterpret_cast<float*>(smem + sh.off_kv);
  consumer_sync();
#pragma unroll
  for (int i = 0; i < MB; ++i)
#pragma unroll
    for (int c = 0; c < 4; ++c)
#pragma unroll
      for (int h = 0; h < 2; ++h)
        s_o[head_of(c) * OS + 64 * i + sl0 + 8 * h] = o[i][4 * (c >> 1) + 2 * h + (c & 1)];
  consumer_sync();
  const long long row0 = (long long)token * H + h0;
  if (tid < HG) {
    s_l[tid] = s_lpart[tid] + s_lpart[HG + tid] + s_lpart[2 * HG + tid] + s_lpart[3 * HG + tid];
    if (p.num_splits == 1) {
      const kc::RowFinal f =
          kc::finalize_row(s_m[tid], s_l[tid], p.sinks != nullptr, p.sinks != nullptr ? p.sinks[h0 + tid] : 0.f, 1.f);
      s_fin[tid] = f.scale;
      if (p.lse != nullptr) p.lse[row0 + tid] = f.lse;
    } else {
      float* ml = p.workspace + (long long)p.num_tokens * H * p.num_splits * LAT + ((row0 + tid) * p.num_splits + split) * 2;
      ml[0] = s_m[tid];
      ml[1] = s_l[tid];
    }
  }
  consumer_sync();
  kc::pdl_launch_dependents();  // the rows are consumed: the next kernel may take the SMs this grid frees
#pragma unroll 1
  for (int r = 0; r < HG; ++r) {
    float v[VPT];
    load_partial(s_o + r * OS + tid * VPT, v);
    if (p.num_splits == 1) {
      unsigned short* orow = static_cast<unsigned short*>(p.out) + (row0 + r) * LAT + tid * VPT;
#pragma unroll
      for (int x = 0; x < VPT; x += 2)
        *reinterpret_cast<unsigned*>(orow + x) = kc::pack_bf16x2(v[x] * s_fin[r], v[x + 1] * s_fin[r]);
    } else {
      float* prow = p.workspace + ((row0 + r) * p.num_splits + split) * LAT + tid * VPT;
#pragma unroll
      for (int x = 0; x < VPT; x += 2) *reinterpret_cast<float2*>(prow + x) = make_float2(v[x], v[x + 1]);
    }
  }
}

// Epilogue of the 64-head kernels at one split: both consumer warpgroups' O (64 heads x LAT, each thread's rows
// r0 and r0 + 8 and columns COLS * wg + 8 n + 2 t4, scaled and rounded as write_rows does) through shared memory,
// so that each warp stores 512 contiguous bytes of a row and the fragments need no exchange between lanes (the
// kernel's code, and its compile time, are smaller than with write_rows). The rows are staged where Q was: only
// warpgroup 0's Q K^T reads Q, and each of its warps waits for its last wgmma before it arrives on "stats", which
// every consumer thread has waited on. stmatrix stores each 8 x 8 block of fragments as eight 16-byte row pieces,
// the row's 16-byte chunks XOR-swizzled by row % 8 (conflict-free for the stores and the 16-byte loads); then one
// barrier of the 256 consumer threads and a copy of whole rows. `out` need only be 4-byte aligned: a row that is
// not 16-byte aligned is stored 4 bytes at a time.
template <class S>
KT_DEV void write_rows_staged(const Params& p, const float (&o)[1][S::kLat / 16][4], const float* s_m,
                              const float* s_l, unsigned char* stage, int h0, int token, int warp, int lane, int tid) {
  constexpr int LAT = S::kLat, H = S::kNumHeads, HG = S::kHeadsPerCta, NO = LAT / 16, CPR = LAT / 8;
  constexpr int kThreads = 256;
  static_assert(HG == 64 && NO % 2 == 0 && HG * CPR % kThreads == 0, "64-head epilogue");
  const int g = lane >> 2, wg = warp >> 2, rbase = 16 * (warp & 3);
  float scale[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int r = rbase + g + 8 * h;
    scale[h] = kc::finalize_row(s_m[r], s_l[r], p.sinks != nullptr, p.sinks != nullptr ? p.sinks[h0 + r] : 0.f, 1.f)
                   .scale;
  }
  // stmatrix: register i of a lane is matrix i = (rows + 8 (i & 1), column block n + (i >> 1)); lane l gives the
  // address of row l % 8 of matrix l / 8.
  const int mrow = rbase + 8 * ((lane >> 3) & 1) + (lane & 7);
  const unsigned srow = kc::smem_u32(stage) + mrow * CPR * 16;
  const int chunk0 = NO * wg + (lane >> 4);
#pragma unroll
  for (int n = 0; n < NO; n += 2) {
    const unsigned w[4] = {kc::pack_bf16x2(o[0][n][0] * scale[0], o[0][n][1] * scale[0]),
                           kc::pack_bf16x2(o[0][n][2] * scale[1], o[0][n][3] * scale[1]),
                           kc::pack_bf16x2(o[0][n + 1][0] * scale[0], o[0][n + 1][1] * scale[0]),
                           kc::pack_bf16x2(o[0][n + 1][2] * scale[1], o[0][n + 1][3] * scale[1])};
    kc::stmatrix_x4(w, srow + (((chunk0 + n) ^ (lane & 7)) << 4));
  }
  write_lse<S>(p, s_m, s_l, h0, token, tid);
  ws::bar_sync(ws::kBarEpilogue, kThreads);
  const bool out16 = (reinterpret_cast<unsigned long long>(p.out) & 15) == 0;
  unsigned short* out = static_cast<unsigned short*>(p.out) + ((long long)token * H + h0) * LAT;
#pragma unroll 4
  for (int i = tid; i < HG * CPR; i += kThreads) {
    const int r = i / CPR, c = i % CPR;
    const uint4 v = *reinterpret_cast<const uint4*>(stage + (r * CPR + (c ^ (r & 7))) * 16);
    unsigned short* dst = out + r * LAT + c * 8;
    if (out16) {
      *reinterpret_cast<uint4*>(dst) = v;
    } else {
      unsigned* d4 = reinterpret_cast<unsigned*>(dst);
      d4[0] = v.x, d4[1] = v.y, d4[2] = v.z, d4[3] = v.w;
    }
  }
}

// An L2 prefetch of the rows a paired CTA gathers, issued by a consumer warp of warpgroup 1, which waits for P most
// of every tile: before the consumers start tile it, lane l touches each 128-byte line of row l of this CTA's half
// of tile it + kAhead. The producer has the loads of up to ST tiles past the consumers' in flight, so kAhead = ST + 1
// is the nearest tile it has not asked for yet; with two stages on an H100, 1 and 2 tiles ahead were 3-7% slower
// (the prefetches compete with the producer's own loads), 3 the fastest (2-4% faster at 64 and 128 tokens), 4 and 6
// in between. Each entry is read one tile before its prefetch, so the warp does not wait for that load. The 16-head
// kernel, whose consumers have no such wait, was 2-16% slower with the same prefetch by its consumer threads.
template <class S>
class PairRowPrefetch {
 public:
  static constexpr int kAhead = S::kStages + 1;
  // row: the row of every tile this thread prefetches; an inactive thread prefetches nothing.
  KT_DEV PairRowPrefetch(const Params& p, int token, int t_begin, int ntiles, int row, bool active)
      : idx_(p.indices + (long long)token * S::kTopk + t_begin * S::kTile + row),
        first_pos_(t_begin * S::kTile + row),
        ntiles_(active ? ntiles : 0),
        next_(entry(kAhead)) {}

  KT_DEV void before_tile(const Params& p, int it) {
    constexpr int RB = WsTraits<S>::sh.raw_bytes;
    const int e = next_;
    next_ = entry(it + 1 + kAhead);
    if (e < 0 || e >= p.num_slots) return;  // past the split, a -1 entry or one the producer will reject
    const unsigned long long row = reinterpret_cast<unsigned long long>(p.kv_cache) + (unsigned long long)e * RB;
    const unsigned long long line0 = row & ~127ull, last = (row + RB - 1) & ~127ull;
#pragma unroll
    for (int l = 0; l < RB / 128 + 2; ++l)
      if (line0 + l * 128 <= last) asm volatile("prefetch.global.L2 [%0];" ::"l"(line0 + l * 128));
  }

 private:
  // The top-k entry of this thread's row of local tile j, or -1 past the split's tiles or past topk.
  KT_DEV int entry(int j) const {
    return j < ntiles_ && first_pos_ + j * S::kTile < S::kTopk ? __ldg(idx_ + j * S::kTile) : -1;
  }
  const int* idx_;
  int first_pos_, ntiles_, next_;
};

template <class S, bool kPair>
KT_DEV void decode_body_ws(const Params& p) {
  constexpr Shape sh = WsTraits<S>::sh;
  constexpr int LAT = S::kLat, D = sh.dim, HG = S::kHeadsPerCta, TN = S::kTile;
  constexpr int ST = S::kStages, H = S::kNumHeads, TOPK = S::kTopk, NTILES = (TOPK + TN - 1) / TN;
  constexpr int COLS = LAT / 2;  // output columns per consumer warpgroup
  static_assert(sh.off_q == 0 && HG * LAT * 2 <= sh.off_kv, "the epilogue stages the rows where Q was");

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
    const int prefetch_row = kPair ? int(kc::cluster_rank()) * 32 + lane : 0;
    PairRowPrefetch<S> prefetch(p, token, t_begin, ntiles, prefetch_row, kPair && warp == 4);
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
      const int b = it % ST;
      const unsigned sK = sb + sh.off_kv + b * sh.kv_tile_bytes;
      prefetch.before_tile(p, it);
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
  if (p.num_splits == 1)
    write_rows_staged<S>(p, o, s_m, s_l, smem + sh.off_q, h0, token, warp, lane, tid);
  else
    write_partials<S>(p, o, s_m, s_l, h0, token, split, 16 * (warp & 3), COLS * wg, g, t4, tid);
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
