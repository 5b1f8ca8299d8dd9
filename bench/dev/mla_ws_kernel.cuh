// EXPERIMENT (not used by the library; built only by bench/dev/mla_attrib.cu): a warp-specialized
// sparse_mla_decode for sm_90a, fp8_ds_mla, 64 heads per CTA, meant to run the FP8 dequantization beside the
// tensor cores instead of between them. It is correct (rel L2 2.5e-4 against the library kernel) but slower on
// the H200: 262-288 us against 179 us at 128 heads / top-k 2048 / 64 tokens (2026-11-29, session 4). With the
// 32-token tiles that fit two bf16 K/V buffers next to Q, the scattered-row gather alone took ~130 us, and four
// producer warps dequantize more slowly than eight warps in lockstep. See bench/results/2026-11-29-mla-session4.md.
//
// 384 threads = three warpgroups. Warpgroup 2 is the producer: for each tile of kTile selected slots it gathers
// the raw 656-byte rows (cp.async, one tile ahead), waits until the consumers have released the bf16 K/V buffer,
// dequantizes into it (same conversion as kernel.cuh) with the tile's slot list, and signals it full.
// Warpgroups 0 and 1 are the consumers: S = Q K^T by wgmma (each its half of the tile's tokens, all 64 heads),
// the online softmax through shared memory (softmax_tile), then O += P V by wgmma (each half of the 512 output
// columns), and release the buffer. Two K/V buffers and two raw buffers alternate. Hand-offs are named barriers
// (bar.arrive by the signalling side, bar.sync by the waiting side): 1 the consumers, 2-3 buffer full, 4-5 buffer
// empty, 6 the producer. setmaxnreg gives the producer 96 registers (five items of the dequantization in flight) and the consumers
// 200 (O is 128 fp32 each).
// Same results contract as decode_kernel (kernel.cuh): splits, sinks, LSE, -1 slots, checked slots.
#pragma once

#include "sparse_mla_decode/kernel.cuh"

namespace ktune_mla {

// Shared memory of the warp-specialized kernel (this file; sm_90a, fp8_ds_mla, 64 heads per CTA): Q, two
// bf16 K/V tiles (a producer warpgroup fills one while two consumer warpgroups use the other), a ring of
// kWsRawTiles raw tiles (gathers kWsRawTiles - 1 tiles ahead), the fp32 scores, P, a ring of kWsRawTiles + 2
// slot lists (written at gather time, read by the softmax) and the per-row softmax state. Offsets that wgmma
// reads through a descriptor are 1024-aligned (the swizzle atom).
constexpr int kWsRawTiles = 3;
struct WsLayout {
  int tile, heads, dim, raw_bytes, raw_chunks;
  int q_bytes, kv_bytes, raw_tile_bytes, s_stride;
  int off_q, off_kv, off_raw, off_s, off_p, off_slot, off_stat, total;
};
KT_HD constexpr int mla_align1024(int a) { return (a + 1023) & ~1023; }
KT_HD constexpr WsLayout make_ws_layout(int lat, int rope, int heads, int tile) {
  WsLayout w{};
  w.tile = tile;
  w.heads = heads;
  w.dim = lat + rope;
  w.raw_bytes = lat + 4 * (lat / 128) + 2 * rope;
  w.raw_chunks = w.raw_bytes / 16;
  w.q_bytes = heads * w.dim * 2;
  w.kv_bytes = tile * w.dim * 2;
  w.raw_tile_bytes = mla_align16(tile * w.raw_bytes);
  w.s_stride = tile + 8;
  w.off_q = 0;
  w.off_kv = mla_align1024(w.off_q + w.q_bytes);
  w.off_p = mla_align1024(w.off_kv + 2 * w.kv_bytes);
  w.off_raw = mla_align1024(w.off_p + heads * tile * 2);
  w.off_s = w.off_raw + kWsRawTiles * w.raw_tile_bytes;
  w.off_slot = w.off_s + heads * w.s_stride * 4;
  w.off_stat = w.off_slot + (kWsRawTiles + 2) * tile * 4;
  w.total = w.off_stat + mla_align16(3 * heads * 4);
  return w;
}


KT_DEV void named_sync(int id, int threads) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory"); }
KT_DEV void named_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
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
// Descriptor of a K-major operand with 64-byte rows in the 64-byte-swizzle layout (swzp<4>: P of a 32-token
// tile): 8-row atoms of 512 bytes.
// Starts an L2 prefetch of `bytes` (a multiple of 16) at src; no completion to wait for.
KT_DEV void prefetch_l2(const void* src, unsigned bytes) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(src), "r"(bytes) : "memory");
#endif
}
KT_DEV unsigned long long wg_desc_sw64(unsigned addr) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(512 >> 4) << 32) |
         (2ull << 62);
}

template <class S>
struct WsTraits {
  static constexpr WsLayout L = make_ws_layout(S::kLat, S::kRope, S::kHeadsPerCta, S::kTile);
  static_assert(S::kFp8 && S::kHeadsPerCta == 64 && S::kTile == 32 && S::kLat % 256 == 0,
                "the warp-specialized kernel: fp8_ds_mla, 64 heads per CTA, 32-token tiles");
};

enum : int { kBarConsumers = 1, kBarFull = 2, kBarEmpty = 4, kBarProducer = 6 };

template <class S>
__global__ void __launch_bounds__(384, 1) decode_kernel_ws(const __grid_constant__ Params p) {
  constexpr WsLayout L = WsTraits<S>::L;
  constexpr int LAT = S::kLat, D = L.dim, HG = S::kHeadsPerCta, TN = S::kTile, H = S::kNumHeads, TOPK = S::kTopk;
  constexpr int RB = L.raw_bytes, RCH = L.raw_chunks, SS = L.s_stride;
  constexpr int NTILES = (TOPK + TN - 1) / TN;
  constexpr int kConsumers = 256, kAll = 384;

  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5;
  const int h0 = blockIdx.x * HG, split = blockIdx.y, token = blockIdx.z;
  const int per_split = (NTILES + p.num_splits - 1) / p.num_splits;
  const int t_begin = split * per_split;
  const int ntiles = max(0, min(NTILES, t_begin + per_split) - t_begin);

  extern __shared__ __align__(128) unsigned char smem[];  // (the dynamic window starts 1024-aligned: no static smem)
  const unsigned sb = kc::smem_u32(smem);
  float* s_S = reinterpret_cast<float*>(smem + L.off_s);
  int* s_slot = reinterpret_cast<int*>(smem + L.off_slot);
  float* s_alpha = reinterpret_cast<float*>(smem + L.off_stat);
  float* s_m = s_alpha + HG;
  float* s_l = s_m + HG;

  // Q by every thread, then the roles split (no CTA-wide barrier after this point).
  const char* qg = static_cast<const char*>(p.q) + ((long long)token * H + h0) * D * 2;
  for (int i = tid; i < HG * (D / 8); i += kAll) {
    const int r = i / (D / 8), c = i % (D / 8);
    kc::cp_async_16(sb + L.off_q + tile_off(HG, r, c), qg + (long long)r * D * 2 + c * 16, 16);
  }
  kc::cp_async_commit();
  kc::cp_async_wait<0>();
  kc::fence_proxy_async();  // Q is read by wgmma
  __syncthreads();

  const int* idx = p.indices + (long long)token * TOPK;
  const char* kvb = static_cast<const char*>(p.kv_cache);

  if (warp >= 8) {
    // ================= producer =================
    regs_dec<96>();
    const int pt = tid - kConsumers, pw = pt >> 5;
    auto slot_at = [&](int j, int r, bool report) {  // cache slot of row r of local tile j, or -1
      const int pos = (t_begin + j) * TN + r;
      const int slot = pos < TOPK ? __ldg(idx + pos) : -1;
      bool valid = slot >= 0;
      if constexpr (S::kChecked) {
        if (slot != -1 && report)
          valid = kc::check_index(p.report, kc::kCheckTopkIndex, (unsigned)token, slot, p.num_slots);
        else if (slot != -1)
          valid = slot >= 0 && slot < p.num_slots;
      }
      return valid ? slot : -1;
    };
    // Lane l < 8 of producer warp pw holds the slot of row pw + 4 l of a tile (loaded a tile before its gather,
    // so issuing a gather never waits on a global load).
    constexpr int RAWN = kWsRawTiles, SLOTN = kWsRawTiles + 2;
    auto load_slots = [&](int j) { return lane < 8 && j < ntiles ? slot_at(j, pw + 4 * lane, true) : -1; };
    auto gather = [&](int j, int slots) {  // tile j's raw rows into raw buffer j % RAWN, slot list j % SLOTN
      const unsigned dst0 = sb + L.off_raw + (j % RAWN) * L.raw_tile_bytes;
#pragma unroll
      for (int i = 0; i < TN / 4; ++i) {
        const int r = pw + 4 * i, slot = __shfl_sync(0xffffffffu, slots, i);
        for (int c = lane; c < RCH; c += 32) {
          const char* src = slot >= 0 ? kvb + (long long)slot * RB + c * 16 : kvb;
          kc::cp_async_16(dst0 + (r * RCH + c) * 16, src, slot >= 0 ? 16 : 0);
        }
        if (lane == 0) s_slot[(j % SLOTN) * TN + r] = slot;
      }
    };
    auto prefetch = [&](int slots) {  // a later tile's rows into L2, so its gather finds them there
      if (lane < 8 && slots >= 0) prefetch_l2(kvb + (long long)slots * RB, RB);
    };
    for (int t = 0; t < RAWN - 1; ++t) {
      if (t < ntiles) gather(t, load_slots(t));
      kc::cp_async_commit();
    }
    // slot lists of the next tiles to gather: sl[0] gathers now, sl[1] next, sl[2] is prefetched into L2 now
    int sl[3] = {load_slots(RAWN - 1), load_slots(RAWN), load_slots(RAWN + 1)};
    prefetch(sl[1]);
    for (int j = 0; j < ntiles; ++j) {
      const int b = j & 1;
      named_sync(kBarProducer, 128);  // every producer thread is done with tile j - 1's raw buffer
      if (j + RAWN - 1 < ntiles) gather(j + RAWN - 1, sl[0]);
      kc::cp_async_commit();
      prefetch(sl[2]);
      sl[0] = sl[1];
      sl[1] = sl[2];
      sl[2] = load_slots(j + RAWN + 2);
      kc::cp_async_wait<RAWN - 1>();
      named_sync(kBarProducer, 128);  // tile j's raw rows from every producer thread have landed
      if (j >= 2) named_sync(kBarEmpty + b, kAll);  // the consumers released K/V buffer b (tile j - 2)
      const unsigned char* raw = smem + L.off_raw + (j % RAWN) * L.raw_tile_bytes;
      unsigned char* kvt = smem + L.off_kv + b * L.kv_bytes;
      if constexpr (!(SkipOf<S>::v & kSkipDequant)) dequant_tile<LAT, S::kRope, TN, RB, 128, 5>(raw, kvt, pt);
      kc::fence_proxy_async();                 // the K/V tile is read by wgmma
      named_arrive(kBarFull + b, kAll);    // K/V buffer b holds tile j
    }
    kc::cp_async_wait<0>();
    return;
  }

  // ================= consumers =================
  regs_inc<200>();
  const int g = lane >> 2, t4 = lane & 3, wg = warp >> 2, wq = warp & 3;
  constexpr int NCOL = LAT / 2;  // output columns per consumer warpgroup
  float o[1][NCOL / 8][4];
#pragma unroll
  for (int n = 0; n < NCOL / 8; ++n) o[0][n][0] = o[0][n][1] = o[0][n][2] = o[0][n][3] = 0.f;
  float m_run = kc::neg_inf(), l_run = 0.f;  // softmax row tid / 4
  const float scale_log2 = p.softmax_scale * kc::kLog2e;
  const int orow0 = 16 * wq, ocol0 = NCOL * wg;

  for (int j = 0; j < ntiles; ++j) {
    const int b = j & 1;
    named_sync(kBarFull + b, kAll);
    const unsigned sK = sb + L.off_kv + b * L.kv_bytes;

    // ---- S = Q K^T: this warpgroup's TN / 2 tokens, all 64 heads, K = D in steps of 16 ----
    if constexpr (!(SkipOf<S>::v & kSkipQK)) qk_wgmma<HG, TN, TN / 2, D>(sb + L.off_q, sK, wg, wq, lane, s_S, SS);
    named_sync(kBarConsumers, kConsumers);

    // ---- online softmax: 4 threads per head row ----
    if constexpr (!(SkipOf<S>::v & kSkipSoftmax))
      softmax_tile<TN, kConsumers / HG>(tid, s_S, SS, s_slot + (j % (kWsRawTiles + 2)) * TN, scale_log2, m_run, l_run, s_alpha,
                                      smem + L.off_p);
    kc::fence_proxy_async();  // P is read by wgmma
    named_sync(kBarConsumers, kConsumers);

    // ---- O = O * alpha + P V: this warpgroup's NCOL columns ----
    {
      const float a0 = s_alpha[orow0 + g], a1 = s_alpha[orow0 + g + 8];
#pragma unroll
      for (int n = 0; n < NCOL / 8; ++n) {
        o[0][n][0] *= a0;
        o[0][n][1] *= a0;
        o[0][n][2] *= a1;
        o[0][n][3] *= a1;
      }
      kc::wg_fence();
#pragma unroll
      for (int kk = 0; kk < ((SkipOf<S>::v & kSkipPV) ? 0 : TN / 16); ++kk)
#pragma unroll
        for (int hh = 0; hh < NCOL / 128; ++hh) {
          const unsigned long long da = wg_desc_sw64(sb + L.off_p) + (unsigned)((kk * 32) >> 4);
          const int blk = (ocol0 + 128 * hh) / 64;
          const unsigned long long db = wg_desc_mn(sK + blk * TN * 128 + kk * 16 * 128, TN * 128, 1024);
          wg_mma_n128_tb(&o[0][16 * hh][0], da, db);
        }
      kc::wg_commit();
      kc::wg_wait<0>();
    }
    if (j + 2 < ntiles) named_arrive(kBarEmpty + b, kAll);  // K/V buffer b is free for tile j + 2
  }
  if (tid % (kConsumers / HG) == 0) {
    s_m[tid / (kConsumers / HG)] = m_run;
    s_l[tid / (kConsumers / HG)] = l_run;
  }
  named_sync(kBarConsumers, kConsumers);
  write_output<S>(p, o, s_m, s_l, h0, token, split, orow0, ocol0, g, t4, tid);
}

}  // namespace ktune_mla
