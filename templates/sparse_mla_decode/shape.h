// Derived geometry of one sparse_mla_decode specialization, shared by the device template (kernel.cuh) and the
// host spec (spec.cpp) so shared-memory sizes and launch shapes can never disagree. Builtin C++ only.
#pragma once
#include "common/dtype.h"

namespace ktune_mla {

// A CTA has 8 or 16 warps (config "w"); in P.V each warp owns kv_lora_rank / warps output columns.
// Warp-specialized shape (config ".ws", kernel_ws.cuh; sm_90a, fp8_ds_mla, 64 or 16 heads, 64-slot tiles): 12
// warps = three warpgroups, `stages` bf16 K/V tiles that producer warpgroups fill straight from global memory (no
// raw tile), P and (64 heads) the per-row rescale factors; with 16 heads the consumer warps' partial max (two
// tiles) and sums per head.

struct Shape {
  // inputs
  int lat, rope, fp8, heads_per_cta, tile, stages, warps;
  // derived
  int threads;      // warps * 32
  int dim;          // lat + rope (Q/K dim)
  int q_chunks;     // 16-byte chunks per bf16 Q/K row (dim / 8)
  int raw_bytes;    // bytes of one cache row (fp8_ds_mla: lat + 4 * lat/128 + 2 * rope; bf16: 2 * dim)
  int raw_chunks;   // raw_bytes / 16
  int m_tiles;      // heads_per_cta / 16
  int n_tiles;      // tile / 8 (tokens of a KV tile in 8-wide mma n tiles)
  int warps_m, warps_n, mt_per_warp, nt_per_warp;  // S = Q K^T partition of the 8 warps
  int s_warps;         // warps busy in S = Q K^T (8, or fewer for tiny score tiles)
  int cols_per_warp;   // P.V: output columns per warp (lat / 8)
  int tpr;             // softmax threads per head row (kThreads / heads_per_cta)
  int s_stride;        // floats per row of the S buffer
  int est_regs, min_blocks;
  // shared memory (bytes, 16-aligned offsets)
  int off_q, off_kv, off_raw, off_s, off_p, off_slot, off_idx, off_stat, off_bar, smem_total;
  int kv_tile_bytes, raw_tile_bytes, kv_buffers, slot_buffers, idx_buffers;
  int ws;           // 1: the warp-specialized shape (kernel_ws.cuh)
};

KT_HD constexpr int mla_align16(int a) { return (a + 15) & ~15; }

KT_HD constexpr int mla_align1024(int a) { return (a + 1023) & ~1023; }

KT_HD constexpr Shape make_shape(int lat, int rope, bool fp8, int heads_per_cta, int tile, int stages, int warps,
                                 bool ws = false) {
  const int kWarps = ws ? 8 : warps;  // ws: the S = Q K^T fields below are unused
  Shape s{};
  s.lat = lat;
  s.rope = rope;
  s.fp8 = fp8 ? 1 : 0;
  s.heads_per_cta = heads_per_cta;
  s.tile = tile;
  s.stages = stages;
  s.warps = warps;
  s.threads = warps * 32;
  s.dim = lat + rope;
  s.q_chunks = s.dim / 8;
  s.raw_bytes = fp8 ? lat + 4 * (lat / 128) + 2 * rope : 2 * s.dim;
  s.raw_chunks = s.raw_bytes / 16;
  s.m_tiles = heads_per_cta / 16;
  s.n_tiles = tile / 8;
  // S = Q K^T: the split of the 8 warps over (m tiles, n tiles) with the fewest ldmatrix.x4 per mma
  // (per pair of k steps a warp loads 2 A fragments per m tile and 1 B fragment per n tile).
  s.warps_m = 1;
  int best_num = 1000, best_den = 1;
  for (int d = 1; d <= kWarps; d *= 2) {
    if (d > s.m_tiles || s.m_tiles % d != 0 || s.n_tiles % (kWarps / d) != 0) continue;
    const int mtw = s.m_tiles / d, ntw = s.n_tiles / (kWarps / d);
    const int num = 2 * mtw + ntw, den = 2 * mtw * ntw;  // loads per mma = num / den
    if (num * best_den < best_num * den) {
      best_num = num;
      best_den = den;
      s.warps_m = d;
    }
  }
  s.warps_n = kWarps / s.warps_m;
  s.s_warps = kWarps;
  if (s.m_tiles * s.n_tiles < kWarps) {  // small tiles (SM120's 99 KB): one 16x8 score tile per busy warp
    s.warps_m = s.m_tiles;
    s.warps_n = s.n_tiles;
    s.s_warps = s.m_tiles * s.n_tiles;
  }
  s.mt_per_warp = s.warps_m > 0 ? s.m_tiles / s.warps_m : 0;
  s.nt_per_warp = s.warps_n > 0 ? s.n_tiles / s.warps_n : 0;
  s.cols_per_warp = lat / kWarps;
  s.tpr = heads_per_cta > 0 ? s.threads / heads_per_cta : 0;
  s.s_stride = tile + 8;
  s.est_regs = s.m_tiles * (s.cols_per_warp / 8) * 4 + s.mt_per_warp * s.nt_per_warp * 4 + 72;
  s.min_blocks = 1;
  // shared memory: Q, converted bf16 K/V tile(s), raw cp.async ring (fp8), S (fp32), P (bf16), slots, stats
  s.kv_tile_bytes = tile * s.dim * 2;
  s.raw_tile_bytes = tile * s.raw_bytes;
  s.kv_buffers = fp8 ? 1 : stages;  // bf16: the ring holds the K/V tiles themselves
  s.off_q = 0;
  s.off_kv = s.off_q + mla_align16(heads_per_cta * s.dim * 2);
  s.off_raw = s.off_kv + s.kv_buffers * s.kv_tile_bytes;
  s.off_s = s.off_raw + (fp8 ? stages * mla_align16(s.raw_tile_bytes) : 0);
  s.off_p = s.off_s + heads_per_cta * s.s_stride * 4;
  s.off_slot = s.off_p + heads_per_cta * tile * 2;
  s.slot_buffers = stages < 2 ? 2 : stages;
  s.off_idx = s.off_slot + mla_align16(s.slot_buffers * tile * 4);
  s.idx_buffers = 2 * (stages >= 2 ? stages - 1 : 1);  // raw top-k entries, fetched one gather ahead
  s.off_stat = s.off_idx + mla_align16(s.idx_buffers * tile * 4);
  s.smem_total = s.off_stat + mla_align16(3 * heads_per_cta * 4);
  if (s.smem_total <= 113 * 1024 && s.est_regs * s.threads <= 32768) s.min_blocks = 2;
  s.off_bar = s.smem_total;  // none
  if (ws) {  // Q, `stages` bf16 K/V tiles, P, the tiles' slot lists, per-row alpha / max / sum, mbarriers
    s.ws = 1;
    s.warps = 12;
    s.threads = 384;
    s.cols_per_warp = lat / 2;  // per consumer warpgroup
    s.kv_buffers = stages;
    s.off_q = 0;
    s.off_kv = mla_align1024(heads_per_cta * s.dim * 2);
    s.off_p = mla_align1024(s.off_kv + stages * s.kv_tile_bytes);
    s.off_raw = s.off_idx = s.off_p;  // none
    s.slot_buffers = stages;
    s.off_slot = s.off_p + heads_per_cta * tile * 2;
    s.off_stat = s.off_slot + mla_align16(stages * tile * 4);
    s.off_s = s.off_stat + mla_align16(3 * heads_per_cta * 4);  // 16 heads: 4 warps x (2 maxima, sum) per head
    s.off_bar = s.off_s + (heads_per_cta == 16 ? mla_align16(3 * 4 * heads_per_cta * 4) : 0);
    // mbarriers: P ready, stats, P free, and per stage full and (paired kernel) peer free / (16 heads) empty
    s.smem_total = s.off_bar + mla_align16(8 * (3 + 2 * stages));
    s.min_blocks = 1;
  }
  return s;
}

// Reason a shape cannot be built, or nullptr (device limits are checked by the host spec).
KT_HD constexpr const char* shape_error(const Shape& s) {
  if (s.lat % 128 != 0 || s.lat < 128 || s.lat > 512) return "kv_lora_rank must be 128, 256, 384 or 512";
  if (s.rope % 64 != 0 || s.rope < 64 || s.rope > 128) return "rope_dim must be 64 or 128";
  if (s.raw_bytes % 16 != 0) return "cache rows must be a multiple of 16 bytes";
  if (s.ws) {  // the rest below is the 8/16-warp kernel's
    if (!s.fp8) return "ws: needs the fp8_ds_mla cache";
    if ((s.heads_per_cta != 64 && s.heads_per_cta != 16) || s.tile != 64)
      return "ws: needs 64 or 16 heads per CTA and 64-slot tiles";
    if (s.stages != 2) return "ws: needs 2 stages (two bf16 K/V tiles)";
    if (s.lat != 512) return "ws: kv_lora_rank must be 512 (the rank of every fp8_ds_mla row of whole 16-byte chunks)";
    return nullptr;
  }
  if (s.heads_per_cta != 16 && s.heads_per_cta != 32 && s.heads_per_cta != 64)
    return "heads per CTA must be 16, 32 or 64";
  if (s.tile != 32 && s.tile != 64) return "tokens per tile must be 32 or 64";
  if (s.stages < (s.fp8 ? 1 : 2) || s.stages > 4)
    return s.fp8 ? "stages must be 1..4" : "stages must be 2..4 (a bf16 cache needs two K/V tiles)";
  if (s.warps_m * s.warps_n != s.s_warps || s.s_warps < 1 || s.mt_per_warp * s.warps_m != s.m_tiles ||
      s.nt_per_warp * s.warps_n != s.n_tiles || s.nt_per_warp < 1)
    return "heads per CTA x tile too small to give each of the 8 warps a 16x8 score tile";
  if (s.tpr > 32 || s.tile % s.tpr != 0 || s.tile / s.tpr < 2) return "tile too small for the softmax threads";
  if (s.warps != 8 && s.warps != 16) return "warps must be 8 or 16";
  if (s.cols_per_warp % 16 != 0) return "kv_lora_rank / warps must be a multiple of 16";
  if (s.est_regs > 240 || s.est_regs > 65536 / s.threads + 24) return "too many accumulator registers per thread";
  return nullptr;
}

}  // namespace ktune_mla
