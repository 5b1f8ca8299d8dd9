// Derived geometry of one mxfp4_gemm config, shared by the device template and the host spec.
#pragma once
#include "common/dtype.h"

namespace ktune_mxfp4 {

// The sm_100a tcgen05 path's shared-memory stage (kernel_tc.cuh; layout in tc_stage.h): 128 k of 128 weight rows
// and bm tokens, both as e4m3 bytes, plus the two 512-byte scale-factor blocks.
constexpr int kTcRows = 128;     // weight rows per CTA: the MMA M
constexpr int kTcKStep = 128;    // k per stage
constexpr int kTcSfBytes = 512;  // one scale block
KT_HD constexpr int tc_stage_bytes(int bm) { return kTcRows * kTcKStep + bm * kTcKStep + 2 * kTcSfBytes; }

struct Shape {
  int bm, tn, wn, wk, stages, depth;  // config
  int wgmma;                           // sm_90a: warpgroup MMA, the decoded weight as the register A operand
  int native;                          // sm_120a: block-scaled e2m1 x e4m3 mma.sync (activations to MXFP8)
  int tcgen05;                         // sm_100a: block-scaled tcgen05.mma from shared memory (kernel_tc.cuh)
  int a_type;                          // activation dtype (fp16 accumulates each 32-block separately)
  int threads, warps, bn, bk;          // tile N = 16 * tn * wn rows of W, tile K = 64 * wk per iteration
  int acc_regs, w_regs;                // per-thread estimates
  int smem_stage, smem_pipe, smem_red, smem_total;  // dynamic shared memory (bytes)
  int smem_static;                                   // static: tile_info, the e8m0 table (kernel.cuh)
  int scale_table;  // s0 with fp32 per-block scaling: e8m0 scales looked up in a 1 KB shared table (kernel.cuh)
  int min_blocks;
};

// The wgmma path's weight ring (kernel.cuh): `depth` slots, each one iteration's packed weight of the CTA (wk
// chunks x wn 16-row tiles x 512 bytes), after the activation stages.
KT_HD constexpr int wgmma_wring_bytes(int wn, int wk, int depth) { return depth * wk * wn * 512; }

// The wgmma path's CTAs per SM for its launch bounds: as many as shared memory holds (sm_90: 228 KB per SM, 1 KB
// of it reserved per CTA), fewer only where a thread would be left less than it needs: the fp32 accumulators
// (bm / 2), the decoded A fragments of two chunks (32), the weight and scale registers (w_regs: the chunk being
// decoded and two scale words) and ~20 for addresses and indices. Without the bound ptxas may take a few registers more than fit, e.g. 132 for
// bm128.wn8, and that halves the CTAs per SM (one CTA of 256 threads instead of two).
KT_HD constexpr int wgmma_min_blocks(const Shape& s) {
  const int smem_blocks = (228 * 1024) / (s.smem_total + s.smem_static + 1024);
  const int need = s.bm / 2 + 32 + s.w_regs + 20;
  int blocks = smem_blocks < 1 ? 1 : smem_blocks;
  while (blocks > 1 && 65536 / (blocks * s.threads) < need) --blocks;
  return blocks;
}

KT_HD constexpr Shape make_shape(int bm, int tn, int wn, int wk, int stages, int depth, int a_type, bool wgmma = false,
                                 bool native = false, bool tcgen05 = false) {
  Shape s{};
  s.bm = bm; s.tn = tn; s.wn = wn; s.wk = wk; s.stages = stages; s.depth = depth; s.a_type = a_type;
  s.wgmma = wgmma ? 1 : 0;
  s.native = native ? 1 : 0;
  s.tcgen05 = tcgen05 ? 1 : 0;
  s.warps = wn * wk;
  s.threads = 32 * s.warps;
  s.bn = 16 * tn * wn;
  s.bk = 64 * wk;
  // see kernel.cuh kPreScale; the native MMA applies the scales itself (no per-block partial sums)
  s.acc_regs = tn * (bm / 8) * 4 * ((a_type == ktune_common::kBF16 && bm > 16) || native ? 1 : 2);
  // stages == 0: activation fragments come from global memory into registers, prefetched like the weight
  // (bm / 8 tiles x 8 registers per chunk), and there is no shared-memory ring.
  s.w_regs = depth * (tn * 5 + (stages == 0 ? bm : 0));
  s.smem_stage = bm * s.bk * 2;
  s.smem_pipe = stages * s.smem_stage;
  s.smem_red = wk > 1 ? wk * wn * tn * (bm / 8) * 4 * 32 * 4 : 0;  // every warp's partial sums (kernel epilogue)
  s.smem_total = s.smem_pipe > s.smem_red ? s.smem_pipe : s.smem_red;
  if (wgmma) {
    s.smem_total += 1024 + wgmma_wring_bytes(wn, wk, depth);  // operand tiles 1024-byte aligned; the weight ring
    s.w_regs = 6;  // the weight waits in the ring: one chunk being decoded (4) and two scale words
  }
  // s0 configs with fp32 per-block scaling (not .mx; the ring configs measured slower with the table)
  s.scale_table = stages == 0 && !((a_type == ktune_common::kBF16 && bm > 16) || native || wgmma) ? 1 : 0;
  s.smem_static = 16 + (s.scale_table ? 1024 : 0) + (wgmma ? 8 * (stages + depth) : 0);  // + wgmma's mbarriers
  if (tcgen05) {  // kernel_tc.cuh: two stages (tc_stage_bytes) + 128 bytes of alignment slack
    s.scale_table = 0;
    s.smem_stage = tc_stage_bytes(bm);
    s.smem_pipe = stages * s.smem_stage;
    s.smem_red = 0;
    s.smem_total = s.smem_pipe + 128;
    s.smem_static = 64;  // tile_info, two mbarriers, the TMEM address
    s.acc_regs = 0;      // the accumulator lives in tensor memory
    s.w_regs = 0;
    s.min_blocks = 1;
    return s;
  }
  if (wgmma) {
    s.min_blocks = wgmma_min_blocks(s);
  } else {  // accumulators, weight prefetch, B fragments and ~40 others per thread
    const int regs = s.acc_regs + s.w_regs + (bm / 8) * 4 + 40;
    s.min_blocks = regs * s.threads > 0 ? 65536 / (((regs + 7) / 8 * 8) * s.threads) : 1;
  }
  if (s.min_blocks < 1) s.min_blocks = 1;
  if (s.min_blocks > 8) s.min_blocks = 8;
  return s;
}

// Reason a shape cannot be built, or nullptr (device limits are checked by the host spec).
KT_HD constexpr const char* shape_error(const Shape& s) {
  if (s.native && s.wgmma) return ".mx (native block-scaled MMA, sm_120a) and .wg (wgmma, sm_90a) exclude each other";
  if (s.tcgen05) {  // one CTA of 4 warps: 128 weight rows (the MMA M) x bm tokens (the MMA N), K 128 per stage
    if (s.native || s.wgmma) return ".tc (tcgen05, sm_100a) excludes .mx and .wg";
    if (s.bm != 16 && s.bm != 32 && s.bm != 64 && s.bm != 128) return "tcgen05: bm expected 16, 32, 64 or 128";
    if (s.tn != 2 || s.wn != 4 || s.wk != 1 || s.stages != 2 || s.depth != 1)
      return "tcgen05: expected tn2.wn4.wk1.s2.d1 (128 weight rows per CTA, 4 warps, two shared-memory stages)";
    return nullptr;
  }
  if (s.wgmma) {  // one m64 x bm x k16 wgmma per warpgroup and k16 step; warpgroups along N and K
    if (s.bm != 32 && s.bm != 64 && s.bm != 128 && s.bm != 192 && s.bm != 256)
      return "wgmma: bm expected 32, 64, 128, 192 or 256";
    if (s.tn != 1 || (s.wn != 4 && s.wn != 8) || (s.wk != 1 && s.wk != 2 && s.wk != 4))
      return "wgmma: expected tn1, wn4 or wn8 (1 or 2 warpgroups along N) and wk1, wk2 or wk4 (warpgroups along K)";
    // bm256: 128 accumulator registers per thread, which ptxas cannot fit under the 128-register cap of 512 threads
    if (s.bm == 256 && s.threads > 256) return "wgmma: bm256 expected at most 8 warps (wn * wk <= 8)";
    if (s.stages < 3) return "wgmma: expected at least 3 stages (one chunk is read while the next two land)";
    if (s.depth != 2 && s.depth != 4 && s.depth != 8) return "wgmma: d expected 2, 4 or 8 (weight ring slots)";
    if (s.a_type != ktune_common::kBF16) return "wgmma: expected bf16 activations";
  } else if (s.bm != 8 && s.bm != 16 && s.bm != 32 && s.bm != 64 && s.bm != 128) {
    return "bm: expected 8, 16, 32, 64 or 128";
  }
  if (s.tn != 1 && s.tn != 2 && s.tn != 4) return "tn: expected 1, 2 or 4";
  if (s.wn != 1 && s.wn != 2 && s.wn != 4 && s.wn != 8) return "wn: expected 1, 2, 4 or 8";
  if (s.wk != 1 && s.wk != 2 && s.wk != 4 && s.wk != 8 && s.wk != 16) return "wk: expected 1, 2, 4, 8 or 16";
  if (s.warps > 16) return "wn * wk: expected at most 16 warps";
  if (s.stages == 0 && s.bm > 16) return "s0 (activations straight from global memory): expected bm 8 or 16";
  if (s.stages != 0 && (s.stages < 2 || s.stages > 8)) return "stages: expected 0 (no ring) or 2..8";
  if (s.depth != 1 && s.depth != 2 && s.depth != 4 && s.depth != 8) return "d: expected 1, 2, 4 or 8";
  if (s.acc_regs > 128) return "too many accumulator registers (tn * bm / 8 * 4, doubled for fp16 activations) > 128";
  if (s.stages != 0 && s.w_regs > 80) return "too many weight prefetch registers (d * tn * 5) > 80";
  if (s.stages == 0 && s.w_regs > 112) return "too many prefetch registers (d * (tn * 5 + bm)) > 112";
  return nullptr;
}

}  // namespace ktune_mxfp4
