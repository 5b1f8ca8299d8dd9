// Where a small batch's time goes in the paired warp-specialized sparse_mla_decode kernel (decode_kernel_ws_pair,
// 128 heads, fp8_ds_mla, 64-slot tiles): the kernel alone (no combine), timed per launch over a 1.4 GB cache (every
// row from HBM), for the same grid of 128 CTAs (64 clusters) with 1, 2, 4, 8, 16 and 32 tiles per CTA — one split
// of top-k 64 .. 2048 over 64 tokens — and the 8-token call's own shape (top-k 2048 in 8 splits: 4 tiles per CTA,
// fp32 partials instead of bf16 rows). A straight line through the one-split rows gives the fixed cost per launch
// (start, Q, first gather, epilogue, end) and the cost per tile; the 8-split row against the 4-tile one is what
// the split itself adds inside the kernel. Nothing here checks results (the GPU suite does); it only times.
// Built by bench/dev/mla_phases.sh twice: as is, and against a copy of templates/ with MLA_STAMP calls inserted
// (globaltimer stamps per CTA at the kernel's phase boundaries), which then also prints where each CTA's time goes.
#include <cuda_runtime.h>

// Stamps of the instrumented build: per CTA, kStamps %globaltimer readings (ns) taken by thread `t` at point k.
constexpr int kStamps = 8, kMaxCtas = 128;
__device__ unsigned long long g_mla_stamps[kMaxCtas * kStamps];
#define MLA_STAMP(k, t)                                                                        \
  do {                                                                                         \
    if (threadIdx.x == (t)) {                                                                  \
      unsigned long long ns_;                                                                  \
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(ns_));                                  \
      g_mla_stamps[(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z)) * kStamps + (k)] = ns_; \
    }                                                                                          \
  } while (0)

#include "cuda_check.hpp"
#include "mla_dev_inputs.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "sparse_mla_decode/kernel_ws.cuh"

using namespace ktune_mla;

void* g_mla_stamps_ptr() {
  void* p = nullptr;
  CK(cudaGetSymbolAddress(&p, g_mla_stamps));
  return p;
}

// The last launch's stamps (instrumented build only): per phase, the median and largest over the CTAs, in us;
// "start spread" is the last CTA's start after the first's, "span" the first start to the last end.
void print_phases(int ctas, const std::string& label) {
  std::vector<unsigned long long> st(kMaxCtas * kStamps);
  CK(cudaMemcpyFromSymbol(st.data(), g_mla_stamps, st.size() * 8));
  if (st[0] == 0) return;
  const char* names[] = {"Q + barrier", "first tile ready", "tile loop", "stats", "epilogue"};
  std::printf("  phases (%s):", label.c_str());
  for (int k = 0; k < 5; ++k) {
    std::vector<double> d;
    for (int c = 0; c < ctas; ++c) d.push_back((st[c * kStamps + k + 1] - st[c * kStamps + k]) * 1e-3);
    std::sort(d.begin(), d.end());
    std::printf(" %s %.2f (max %.2f);", names[k], d[d.size() / 2], d.back());
  }
  unsigned long long s0 = ~0ull, s0max = 0, e = 0, pe = 0;
  for (int c = 0; c < ctas; ++c) {
    s0 = std::min(s0, st[c * kStamps]), s0max = std::max(s0max, st[c * kStamps]);
    e = std::max(e, st[c * kStamps + 5]), pe = std::max(pe, st[c * kStamps + 6]);
  }
  std::printf(" start spread %.2f; span %.2f; last producer end %.2f after the first start\n", (s0max - s0) * 1e-3,
              (e - s0) * 1e-3, (pe - s0) * 1e-3);
  CK(cudaMemset(g_mla_stamps_ptr(), 0, st.size() * 8));
}

template <int kTopk>
double time_pair(Params p, int tokens, int splits) {
  using S = DevWsSpec<kTopk>;
  constexpr Shape ws = WsTraits<S>::sh;
  auto kern = decode_kernel_ws_pair<S>;
  allow_smem(kern, ws.smem_total);
  p.num_tokens = tokens;
  p.num_splits = splits;
  const dim3 grid(2, splits, tokens);
  const double us = median_us_queued([&] { kern<<<grid, 384, ws.smem_total>>>(p); });
  print_phases(2 * splits * tokens, std::to_string(kTopk / 64 / splits) + " tiles, " + std::to_string(tokens) + "x" +
                                        std::to_string(splits));
  return us;
}

int main() {
  const MlaDevInputs host = make_mla_dev_inputs(64, 2048, 32768, 64, true, 3, -1);
  const Params p = upload_mla_dev_inputs(host, 8);
  std::printf("| grid | tokens x splits | tiles per CTA | us (median of 40) |\n| --- | --- | --- | --- |\n");
  struct Pt {
    int tiles;
    double us;
  };
  std::vector<Pt> pts;
  auto row = [&](int tiles, int tokens, int splits, double us, bool fit) {
    std::printf("| %d CTAs | %d x %d | %d | %.2f |\n", 2 * tokens * splits, tokens, splits, tiles, us);
    if (fit) pts.push_back({tiles, us});
  };
  row(1, 64, 1, time_pair<64>(p, 64, 1), true);
  row(2, 64, 1, time_pair<128>(p, 64, 1), true);
  row(4, 64, 1, time_pair<256>(p, 64, 1), true);
  row(8, 64, 1, time_pair<512>(p, 64, 1), true);
  row(16, 64, 1, time_pair<1024>(p, 64, 1), true);
  row(32, 64, 1, time_pair<2048>(p, 64, 1), true);
  row(4, 8, 8, time_pair<2048>(p, 8, 8), false);
  row(8, 8, 4, time_pair<2048>(p, 8, 4), false);
  double sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (const Pt& q : pts) sx += q.tiles, sy += q.us, sxx += double(q.tiles) * q.tiles, sxy += q.tiles * q.us;
  const double n = pts.size(), slope = (n * sxy - sx * sy) / (n * sxx - sx * sx), icpt = (sy - slope * sx) / n;
  std::printf("one split, least squares: %.2f us fixed + %.3f us per tile\n", icpt, slope);
  return 0;
}
