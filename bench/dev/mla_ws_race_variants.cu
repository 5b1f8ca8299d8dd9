// Which part of the .ws kernel's pattern made compute-sanitizer's racecheck report the s_alpha / s_m / s_l
// hand-offs between the consumer warpgroups? The consumer body of decode_body_ws as it was before the hand-offs
// moved to mbarriers (a 256-thread P-ready barrier.sync of both warpgroups, a named epilogue barrier), with one
// change per variant; same launch and reference check as mla_ws_sanitize.cu. On the H200 (racecheck, splits 1):
// 0-2, 4, 6, 7 report every factor read against its store; 8 and 9 report nothing; 3 and 5 hang.
//   0 the named-barrier hand-off              1 no setmaxnreg
//   2 the producer stays to the end (joins a 384-thread epilogue barrier)
//   3 P-free as a barrier.sync on both sides (no barrier.arrive between the consumers)
//   4 s_alpha double-buffered by tile parity  5 = 1 + 2 + 3
//   6 no divergent store: every lane of a quad stores (and reads back) its own copy of the row's factor
//   7 __syncwarp() after the divergent s_alpha store, before the P-ready barrier
//   8 P-ready barrier kept, and an mbarrier besides for s_alpha (warpgroup 0 arrives, warpgroup 1 waits); the
//     same for s_m / s_l before the epilogue barrier
//   9 P ready by an mbarrier only (warpgroup 0 arrives and goes on; warpgroup 1 waits), epilogue as 8 (the
//     template now does this, with warpgroup 0 also waiting on the phase before its own P V)
//   nvcc -std=c++17 -O3 -lineinfo -gencode=arch=compute_90a,code=sm_90a -Itemplates -Ibench/dev \
//        bench/dev/mla_ws_race_variants.cu -o .devbuild/mla_ws_race_variants
//   compute-sanitizer --tool racecheck --racecheck-report hazard .devbuild/mla_ws_race_variants V
#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "mla_dev_inputs.hpp"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "common/tma.cuh"
#include "sparse_mla_decode/kernel_ws.cuh"
#include "mla_dev_launch.hpp"

namespace ktune_mla {
using BaseSpec = DevBaseSpec<512>;
using WsSpec = DevWsSpec<512>;

KT_DEV void mbar_arrive_plain(unsigned bar) {
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.release.cta.shared::cta.b64 st, [%0];\n}" ::"r"(bar) : "memory");
}

constexpr int kBarPReady = 5, kBarEpilogue = 7;  // the named barriers the hand-offs used

template <class S, int V>
KT_DEV void body_var(const Params& p) {
  constexpr bool kNoRegs = V == 1 || V == 5, kProducerStays = V == 2 || V == 5, kSyncFree = V == 3 || V == 5;
  constexpr bool kAlphaParity = V == 4, kPerLane = V == 6, kSyncWarp = V == 7, kMbar = V == 8 || V == 9;
  constexpr bool kMbarOnly = V == 9;
  constexpr Shape sh = WsTraits<S>::sh;
  constexpr int HG = S::kHeadsPerCta, TN = S::kTile, ST = S::kStages, TOPK = S::kTopk, NTILES = (TOPK + TN - 1) / TN;
  constexpr int COLS = S::kLat / 2, D = sh.dim;
  const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, wg = warp >> 2;
  const int g = lane >> 2, t4 = lane & 3;
  const int h0 = blockIdx.x * HG, split = blockIdx.y, token = blockIdx.z;
  const int per_split = (NTILES + p.num_splits - 1) / p.num_splits;
  const int t_begin = split * per_split;
  const int ntiles = max(0, min(NTILES, t_begin + per_split) - t_begin);
  extern __shared__ __align__(128) unsigned char smem[];
  const unsigned sb = kc::smem_u32(smem);
  const int* s_slot = reinterpret_cast<const int*>(smem + sh.off_slot);
  float* s_alpha = reinterpret_cast<float*>(smem + sh.off_stat);
  float* s_m = s_alpha + HG;
  float* s_l = s_m + HG;
  float* s_alpha1 = s_l + HG;  // the launch gives every variant 5 HG floats more than the template's smem_total
  float* s_alpha4 = reinterpret_cast<float*>(smem + sh.smem_total + 4 * HG);  // [row][t4]
  const unsigned mb_alpha = sb + sh.smem_total + 20 * HG, mb_stat = mb_alpha + 8;
  if (kMbar && tid == 0) {
    kc::mbar_init(mb_alpha, 128);
    kc::mbar_init(mb_stat, 128);
  }
  constexpr int kEpi = kProducerStays ? ws::kAll : ws::kConsumers;

  issue_q_tile<S::kNumHeads, HG, D>(p, sb + sh.off_q, token, h0, tid, ws::kAll);
  kc::cp_async_commit();
  kc::cp_async_wait<0>();
  kc::fence_proxy_async();
  __syncthreads();
  if (wg == 2) {
    if constexpr (!kNoRegs) ws::regs_dec<ws::kRegsProducer>();
    produce_ws<S>(p, smem, t_begin, ntiles, token, warp - 8, lane);
    if constexpr (kProducerStays) ws::bar_sync(kBarEpilogue, kEpi);
    return;
  }
  float o[1][COLS / 8][4];
#pragma unroll
  for (int n = 0; n < COLS / 8; ++n) o[0][n][0] = o[0][n][1] = o[0][n][2] = o[0][n][3] = 0.f;
  const int r0 = 16 * (warp & 3) + g;
  const unsigned sP = sb + sh.off_p;
  if (wg == 0) {
    if constexpr (!kNoRegs) ws::regs_inc<ws::kRegsQK>();
    const float scale_log2 = p.softmax_scale * kc::kLog2e;
    float m_run[2] = {kc::neg_inf(), kc::neg_inf()}, l_run[2] = {0.f, 0.f};
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
      const int b = it % ST;
      const unsigned sK = sb + sh.off_kv + b * sh.kv_tile_bytes;
      ws::bar_sync(ws::kBarFull + b, ws::kAll);
      float d[TN / 2];
      qk_wgmma_regs<HG, TN, TN, D>(d, sb + sh.off_q, sK, 0);
      if (it > 0) ws::bar_sync(ws::kBarPFree, ws::kConsumers);
      float alpha[2];
      softmax_regs<HG, TN, TN, 1>(d, s_slot + b * TN, 0, r0, t4, scale_log2, m_run, l_run, alpha, nullptr,
                                  smem + sh.off_p);
      float* sa = kAlphaParity && (it & 1) ? s_alpha1 : s_alpha;
      if constexpr (kPerLane) {
        s_alpha4[r0 * 4 + t4] = alpha[0];
        s_alpha4[(r0 + 8) * 4 + t4] = alpha[1];
      } else if (t4 == 0) {
        sa[r0] = alpha[0];
        sa[r0 + 8] = alpha[1];
      }
      if constexpr (kSyncWarp) __syncwarp();
      kc::fence_proxy_async();
      if constexpr (kMbar) mbar_arrive_plain(mb_alpha);
      if constexpr (!kMbarOnly) ws::bar_sync(kBarPReady, ws::kConsumers);
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
    if constexpr (kMbar) mbar_arrive_plain(mb_stat);
  } else {
    if constexpr (!kNoRegs) ws::regs_dec<ws::kRegsPV>();
#pragma unroll 1
    for (int it = 0; it < ntiles; ++it) {
      const int b = it % ST;
      const unsigned sK = sb + sh.off_kv + b * sh.kv_tile_bytes;
      ws::bar_sync(ws::kBarFull + b, ws::kAll);
      if constexpr (!kMbarOnly) ws::bar_sync(kBarPReady, ws::kConsumers);
      if constexpr (kMbar) kc::mbar_wait(mb_alpha, it & 1);
      const float* sa = kAlphaParity && (it & 1) ? s_alpha1 : s_alpha;
      if constexpr (kPerLane)
        rescale_o_rows(o, s_alpha4[r0 * 4 + t4], s_alpha4[(r0 + 8) * 4 + t4]);
      else
        rescale_o_rows(o, sa[r0], sa[r0 + 8]);
      pv_wgmma<TN, COLS>(o, sP, sK, COLS);
      if (it + 1 < ntiles) {
        if constexpr (kSyncFree)
          ws::bar_sync(ws::kBarPFree, ws::kConsumers);
        else
          ws::bar_arrive(ws::kBarPFree, ws::kConsumers);
      }
      if (it + ST < ntiles) ws::bar_arrive(ws::kBarEmpty + b, ws::kAll);
    }
  }
  ws::bar_sync(kBarEpilogue, kEpi);
  if constexpr (kMbar) kc::mbar_wait(mb_stat, 0);
  write_output<S>(p, o, s_m, s_l, h0, token, split, 16 * (warp & 3), COLS * wg, g, t4, tid);
}

template <class S, int V>
__global__ void __launch_bounds__(384, 1) kernel_var(const __grid_constant__ Params p) {
  body_var<S, V>(p);
}
}  // namespace ktune_mla
using namespace ktune_mla;

template <int V>
int run_variant(Params p, int tokens) {
  constexpr Shape bs = Traits<BaseSpec>::sh;
  constexpr Shape ws = WsTraits<WsSpec>::sh;
  int failures = 0;
  for (int splits : {1, 3, 5}) {
    if (splits > 1 && std::getenv("SPLITS1")) break;
    p.num_splits = splits;
    std::vector<unsigned short> ref_out, ws_out;
    std::vector<float> ref_lse, ws_lse;
    launch_and_read<BaseSpec>(decode_kernel<BaseSpec>, bs.threads, bs.smem_total, p, tokens, splits, ref_out, ref_lse);
    launch_and_read<BaseSpec>(kernel_var<WsSpec, V>, 384, ws.smem_total + 4 * 5 * WsSpec::kHeadsPerCta + 16, p, tokens, splits, ws_out, ws_lse);
    double num = 0, den = 0;
    size_t bad = 0;
    for (size_t i = 0; i < ws_out.size(); ++i) {
      const double u = bf16_value(ref_out[i]), v = bf16_value(ws_out[i]);
      if (std::isfinite(u) != std::isfinite(v)) ++bad;
      if (!std::isfinite(u) || !std::isfinite(v)) continue;
      num += (u - v) * (u - v);
      den += u * u;
    }
    for (size_t i = 0; i < ws_lse.size(); ++i)
      if (std::isinf(ref_lse[i]) || std::isinf(ws_lse[i])) bad += ref_lse[i] != ws_lse[i];
    const double rel = den > 0 ? std::sqrt(num / den) : 0;
    const bool ok = bad == 0 && rel < 1e-2;
    failures += !ok;
    std::printf("variant %d splits %d: rel L2 %.2e, mismatched non-finite %zu: %s\n", V, splits, rel, bad,
                ok ? "ok" : "FAILED");
  }
  return failures;
}

int main(int argc, char** argv) {
  const int v = argc > 1 ? std::atoi(argv[1]) : 0;
  const int tokens = 6, all_skip = 4;
  const MlaDevInputs host = make_mla_dev_inputs(tokens, 512, 8, 64, true, 5, all_skip);
  Params p = upload_mla_dev_inputs(host, 8);
  p.num_tokens = tokens;
  int f = 0;
  switch (v) {
    case 0: f = run_variant<0>(p, tokens); break;
    case 1: f = run_variant<1>(p, tokens); break;
    case 2: f = run_variant<2>(p, tokens); break;
    case 3: f = run_variant<3>(p, tokens); break;
    case 4: f = run_variant<4>(p, tokens); break;
    case 5: f = run_variant<5>(p, tokens); break;
    case 6: f = run_variant<6>(p, tokens); break;
    case 7: f = run_variant<7>(p, tokens); break;
    case 8: f = run_variant<8>(p, tokens); break;
    case 9: f = run_variant<9>(p, tokens); break;
    default: std::printf("variant 0..9\n"); return 2;
  }
  return f ? 1 : 0;
}
