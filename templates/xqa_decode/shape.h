// Derived geometry of one xqa_decode specialization: shared by the device template (kernel.cuh) and the
// host spec (spec.cpp) so that smem sizes, register estimates and launch shapes can never disagree.
// Plain constexpr C++ (host) / NVRTC device code: no includes besides dtype.h.
#pragma once
#include "common/dtype.h"

namespace ktune_xqa {

struct Shape {
  // inputs
  int head_dim, group, max_q_len, page_size, kv_type;
  int tokens_per_tile, stages, warps, cfg_m_tiles;  // cfg_m_tiles: 0 = all query rows in one CTA
  bool wg;           // Hopper wgmma path: a warpgroup per 64 rows, K/V and Q in the 128-byte-swizzle layout
  // derived
  int rows;          // query rows per kv head: max_q_len * group (row r = q_index * group + head_in_group)
  int m_tiles;       // ceil(rows / 16)
  int cta_m_tiles;   // m tiles handled by one CTA
  int m_groups;      // CTAs splitting the rows of one kv head (grid.y = num_kv_heads * m_groups)
  int cta_rows;      // cta_m_tiles * 16
  int warps_m;       // warps along the rows
  int warps_n;       // warps along the tokens of a KV tile
  int mt_per_warp;   // m tiles held by one warp
  int tok_per_warp;  // tokens of a KV tile handled by one warp
  int threads;
  int kv_chunks;     // 16-byte chunks per K (or V) row
  int pages_per_tile;
  bool q_in_regs;    // Q fragments kept in registers (else re-read from smem per tile; wg: read by wgmma)
  int est_regs;      // rough per-thread register estimate
  int min_blocks;    // __launch_bounds__ min blocks per SM
  // shared memory layout (bytes, 16-aligned offsets)
  int smem_stage;    // one stage: K tile + V tile
  int smem_pipe;     // stages * smem_stage, aliased by the epilogue buffer
  int smem_epi;      // warps * 16 rows * (64 + 8) floats
  int off_q, off_pages, off_stats, smem_total;
};

KT_HD constexpr int cdiv(int a, int b) { return (a + b - 1) / b; }
KT_HD constexpr int align16(int a) { return (a + 15) & ~15; }
KT_HD constexpr int align1024(int a) { return (a + 1023) & ~1023; }

KT_HD constexpr Shape make_shape(int head_dim, int group, int max_q_len, int page_size, int kv_type,
                                 int tokens_per_tile, int stages, int warps, int cfg_m_tiles, bool wg = false) {
  Shape s{};
  s.head_dim = head_dim;
  s.group = group;
  s.max_q_len = max_q_len;
  s.page_size = page_size;
  s.kv_type = kv_type;
  s.tokens_per_tile = tokens_per_tile;
  s.stages = stages;
  s.warps = warps;
  s.cfg_m_tiles = cfg_m_tiles;
  s.wg = wg;
  s.rows = max_q_len * group;
  s.m_tiles = cdiv(s.rows, 16);
  s.cta_m_tiles = (cfg_m_tiles <= 0 || cfg_m_tiles > s.m_tiles) ? s.m_tiles : cfg_m_tiles;
  s.m_groups = cdiv(s.m_tiles, s.cta_m_tiles);
  s.cta_rows = s.cta_m_tiles * 16;
  s.warps_m = 1;
  for (int d = 1; d <= warps; ++d)
    if (warps % d == 0 && d <= s.cta_m_tiles) s.warps_m = d;
  s.warps_n = warps / s.warps_m;
  s.mt_per_warp = cdiv(s.cta_m_tiles, s.warps_m);
  s.tok_per_warp = tokens_per_tile / s.warps_n;
  s.threads = warps * 32;
  s.kv_chunks = head_dim * ktune_common::dtype_size(kv_type) / 16;
  s.pages_per_tile = tokens_per_tile > page_size ? tokens_per_tile / page_size : 1;
  s.q_in_regs = !wg && s.mt_per_warp * head_dim * 3 / 4 <= 128;
  // wg: no Q or K/V fragments in registers (wgmma reads them from smem), so less than the mma.sync path's 56
  s.est_regs = s.mt_per_warp * head_dim / 2 + s.mt_per_warp * s.tok_per_warp / 2 +
               (s.q_in_regs ? s.mt_per_warp * head_dim / 4 : 0) + (wg ? 40 : 56);
  int per_block = s.threads * ((s.est_regs + 7) / 8 * 8);
  s.min_blocks = per_block > 0 ? 65536 / per_block : 1;
  if (s.min_blocks < 1) s.min_blocks = 1;
  if (s.min_blocks > 4) s.min_blocks = 4;
  s.smem_stage = 2 * tokens_per_tile * head_dim * ktune_common::dtype_size(kv_type);
  s.smem_pipe = stages * s.smem_stage;
  s.smem_epi = warps * 16 * (64 + 8) * 4;
  int region0 = align16(s.smem_pipe > s.smem_epi ? s.smem_pipe : s.smem_epi);
  if (wg) region0 = align1024(region0);  // Q is a wgmma operand: 1024-byte swizzle atoms
  s.off_q = region0;
  s.off_pages = s.off_q + align16(s.cta_rows * head_dim * 2);
  s.off_stats = s.off_pages + align16(stages * s.pages_per_tile * 4);
  // stats: m and l per (warp_n, row), then the merged weights reuse m; plus one scale per row
  s.smem_total = s.off_stats + align16((2 * s.warps_n + 1) * s.cta_rows * 4);
  return s;
}

// Reason a shape cannot be built, or nullptr (limits other than smem/threads are checked by the host spec).
KT_HD constexpr const char* shape_error(const Shape& s) {
  if (s.tokens_per_tile % 16 != 0) return "tokens_per_tile must be a multiple of 16";
  if (s.stages < 2) return "stages must be >= 2";
  if (s.tok_per_warp < 16 || s.tok_per_warp % 16 != 0 || s.tok_per_warp * s.warps_n != s.tokens_per_tile)
    return "tokens_per_tile must give every token-warp a multiple of 16 tokens";
  if (s.threads % s.kv_chunks != 0 || s.tokens_per_tile % (s.threads / s.kv_chunks) != 0)
    return "tokens_per_tile must be a multiple of threads / (16-byte chunks per KV row)";
  if (s.kv_chunks < 4) return "KV rows shorter than 64 bytes";
  if (s.tokens_per_tile % s.page_size != 0 && s.page_size % s.tokens_per_tile != 0)
    return "tokens_per_tile and page_size must divide one another";
  if (s.est_regs > 232) return "too many accumulator registers per thread (use more warps or fewer m tiles per CTA)";
  if (s.threads * s.est_regs > 65536) return "register file too small for this many warps";
  if (s.wg) {
    if (s.cta_m_tiles != 4 && s.cta_m_tiles != 8)
      return "wg: expected 64 or 128 query rows a CTA (max_q_len * group of 49..64 or 113..128, or .m4 / .m8)";
    if (s.warps != s.cta_m_tiles) return "wg: expected one warpgroup per 64 rows (4 warps for 64 rows, 8 for 128)";
    if (s.head_dim != 64 && s.head_dim != 128) return "wg: expected head_dim 64 or 128";
    if (s.kv_type == ktune_common::kE4M3) return "wg: expected 16-bit KV (bf16 or fp16)";
    if (s.tokens_per_tile != 32 && s.tokens_per_tile != 64) return "wg: expected tokens_per_tile 32 or 64";
  }
  return nullptr;
}

}  // namespace ktune_xqa
