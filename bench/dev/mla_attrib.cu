// Time attribution for sparse_mla_decode on the H200 (issue 6): the production kernel (kernel.cuh) with one or
// more phases left out through the Spec's kSkip mask (kernel.cuh: SkipOf), at the issue's bench shape
// (128 heads, top-k 2048, fp8_ds_mla, 64 tokens, t64.s1.g64.wg). The full kernels' outputs are compared with
// the mma.sync (no wgmma) kernel's, bit for bit and by rel L2; the phase-skipping ones are timing only.
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Itemplates -Ibench/dev bench/dev/mla_attrib.cu -o mla_attrib
#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "mla_dev_inputs.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <vector>

#include "sparse_mla_decode/kernel.cuh"


namespace ktune_mla {
template <int kSkipMask, int kW, bool kWg = true, int kBatch = 1>
struct AttribSpec {
  static constexpr int kNumHeads = 128, kLat = 512, kRope = 64, kTopk = 2048, kPageSize = 64;
  static constexpr bool kFp8 = true;
  static constexpr int kMaxQLen = 1;
  static constexpr bool kChecked = false;
  static constexpr int kHeadsPerCta = 64, kTile = 64, kStages = 1, kWarps = kW;
  static constexpr bool kWgmma = kWg;
  static constexpr int kSkip = kSkipMask;
};
}  // namespace ktune_mla

using namespace ktune_mla;

struct Inputs {
  Params p{};
  int tokens = 64;
};

std::vector<unsigned short> g_base;  // the production kernel's output, for the bitwise comparison

struct LaunchShape {
  int threads, smem;
};
template <class S, int kSkipMask>
void run_kernel(const Inputs& in, const char* what, void (*kern)(Params), LaunchShape sh);

template <int kSkipMask, int kW, bool kWg = true, int kBatch = 1>
void run(const Inputs& in, const char* what, double) {
  using S = AttribSpec<kSkipMask, kW, kWg, kBatch>;
  constexpr Shape sh = Traits<S>::sh;
  run_kernel<S, kSkipMask>(in, what, decode_kernel<S>, LaunchShape{sh.threads, sh.smem_total});
}

template <class S, int kSkipMask>
void run_kernel(const Inputs& in, const char* what, void (*kern)(Params), LaunchShape sh) {
  constexpr int kW = S::kWarps;
  allow_smem(kern, sh.smem);
  const dim3 grid(S::kNumHeads / S::kHeadsPerCta, 1, in.tokens);
  const int reps = 30;
  std::vector<cudaEvent_t> ev(2 * reps);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int i = 0; i < 3; ++i) kern<<<grid, sh.threads, sh.smem>>>(in.p);
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(ev[2 * i]));
    kern<<<grid, sh.threads, sh.smem>>>(in.p);
    CK(cudaEventRecord(ev[2 * i + 1]));
  }
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<float> t(reps);
  for (int i = 0; i < reps; ++i) CK(cudaEventElapsedTime(&t[i], ev[2 * i], ev[2 * i + 1]));
  std::sort(t.begin(), t.end());
  const double us = t[reps / 2] * 1e3;
  if (kSkipMask == 0) {  // compare the full kernels' outputs bit for bit
    std::vector<unsigned short> out(size_t(in.tokens) * 128 * 512);
    CK(cudaMemset(in.p.out, 0xFF, out.size() * 2));
    kern<<<grid, sh.threads, sh.smem>>>(in.p);
    CK(cudaGetLastError());
    CK(cudaMemcpy(out.data(), in.p.out, out.size() * 2, cudaMemcpyDeviceToHost));
    if (g_base.empty()) g_base = out;
    size_t diff = 0;
    double num = 0, den = 0;
    auto f = [](unsigned short h) { unsigned u = unsigned(h) << 16; float v; std::memcpy(&v, &u, 4); return double(v); };
    for (size_t i = 0; i < out.size(); ++i) {
      diff += out[i] != g_base[i];
      num += (f(out[i]) - f(g_base[i])) * (f(out[i]) - f(g_base[i]));
      den += f(g_base[i]) * f(g_base[i]);
    }
    std::printf("   output vs the first full kernel (mma.sync QK and PV): %zu of %zu bf16 differ, rel L2 %.2e\n", diff,
                out.size(), std::sqrt(num / den));
  }
  const double flops = 2.0 * in.tokens * S::kNumHeads * S::kTopk * (576 + 512);
  std::printf("w%-2d skip %-34s %8.1f us  %6.1f TFLOP/s\n", kW, what, us, flops / us / 1e6);
  for (auto& e : ev) CK(cudaEventDestroy(e));
}

int main() {
  Inputs in;
  const MlaDevInputs host = make_mla_dev_inputs(in.tokens, 2048, 4096, 64, false, 0, -1);
  in.p = upload_mla_dev_inputs(host, 1);
  run<0, 8, false>(in, "none, mma.sync QK + PV (reference)", 0);
  run<0, 8>(in, "none (wgmma QK + PV)", 0);
  run<kSkipGather, 8>(in, "gather", 0);
  run<kSkipDequant, 8>(in, "dequant", 0);
  run<kSkipQK, 8>(in, "QK", 0);
  run<kSkipSoftmax, 8>(in, "softmax", 0);
  run<kSkipPV, 8>(in, "PV", 0);
  run<kSkipGather | kSkipDequant, 8>(in, "gather+dequant", 0);
  run<kSkipQK | kSkipPV, 8>(in, "QK+PV", 0);
  run<kSkipGather | kSkipDequant | kSkipSoftmax, 8>(in, "gather+dequant+softmax (MMAs only)", 0);
  run<kSkipGather | kSkipDequant | kSkipQK | kSkipSoftmax | kSkipPV, 8>(in, "everything (loop skeleton)", 0);
  run<0, 16>(in, "none (w16)", 0);
  run<0, 8, true, 5>(in, "none, dequant batch 5", 0);
  run<0, 16, true, 2>(in, "none (w16), dequant batch 2", 0);
  run<kSkipQK | kSkipSoftmax | kSkipPV, 8>(in, "QK+softmax+PV", 0);
  return 0;
}
