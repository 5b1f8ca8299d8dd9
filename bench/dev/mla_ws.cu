// The warp-specialized sparse_mla_decode kernel (kernel_ws.cuh), alone and paired (decode_kernel_ws_pair: the
// two head groups of a token as a cluster sharing each tile's loads), against the library's default sm_90a kernel
// (kernel.cuh, t64.s1.g64.wg) on the same inputs: 128 heads, top-k 2048, fp8_ds_mla, 64 and 128 tokens, about
// 3% of the entries -1 and one token with every entry -1. Prints rel L2 of the outputs and the largest LSE difference against the
// library kernel, the bf16 values that differ, and the time per call (median of 30).
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Xptxas -v -Itemplates -Ibench/dev \
//        bench/dev/mla_ws.cu -o .devbuild/mla_ws
#include <cuda_runtime.h>

#include "cuda_check.hpp"
#include "mla_dev_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "sparse_mla_decode/kernel_ws.cuh"

namespace ktune_mla {
using BaseSpec = DevBaseSpec<2048>;
using WsSpec = DevWsSpec<2048>;
}  // namespace ktune_mla
using namespace ktune_mla;

struct Run {
  std::vector<unsigned short> out;
  std::vector<float> lse;
  double us;
};

template <class Kern>
Run run(Kern kern, int threads, int smem, const Params& p, int tokens, int splits, int groups = 2) {
  allow_smem(kern, smem);
  const dim3 grid(groups, splits, tokens);
  Run r;
  r.out.resize(size_t(tokens) * 128 * 512);
  r.lse.resize(size_t(tokens) * 128);
  CK(cudaMemset(p.out, 0xFF, r.out.size() * 2));
  CK(cudaMemset(p.lse, 0xFF, r.lse.size() * 4));
  kern<<<grid, threads, smem>>>(p);
  if (splits > 1) combine_kernel<BaseSpec><<<dim3(128, tokens), 128>>>(p);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  CK(cudaMemcpy(r.out.data(), p.out, r.out.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(r.lse.data(), p.lse, r.lse.size() * 4, cudaMemcpyDeviceToHost));
  r.us = median_us_queued(
      [&] {
        kern<<<grid, threads, smem>>>(p);
        if (splits > 1) combine_kernel<BaseSpec><<<dim3(128, tokens), 128>>>(p);
      },
      30);
  return r;
}

int main(int argc, char** argv) {
  const int topk = 2048;
  // argv[1]: cache pages of 64 rows (default 4096: 172 MB, so repeated calls with the same indices find part of
  // their rows in L2; 32768 pages: 1.4 GB, nearly every row from HBM as in serving)
  const int pages = argc > 1 ? std::atoi(argv[1]) : 4096;
  const MlaDevInputs host = make_mla_dev_inputs(128, topk, pages, 64, true, 3, 5);  // token 5: nothing valid
  std::printf("cache %d pages of 64 rows (%.0f MB)\n", pages, pages * 64.0 * 656 / 1e6);
  Params p = upload_mla_dev_inputs(host, 8);

  constexpr Shape bs = Traits<BaseSpec>::sh;
  constexpr Shape ws = WsTraits<WsSpec>::sh;
  std::printf("ws smem %d B\n", ws.smem_total);
  std::printf("%-8s %-6s %-5s %12s %12s %10s %12s %12s %8s %12s\n", "tokens", "splits", "ws", "library us", "ws us",
              "TFLOP/s", "rel L2 out", "max |dlse|", "differ", "pair != one");
  const int shapes[][2] = {{8, 8}, {64, 1}, {64, 4}, {128, 1}};  // tokens, splits
  for (const auto& sh : shapes) {
    const int tokens = sh[0], splits = sh[1];
    p.num_tokens = tokens;
    p.num_splits = splits;
    const Run a = run(decode_kernel<BaseSpec>, bs.threads, bs.smem_total, p, tokens, splits);
    const Run one = run(decode_kernel_ws<WsSpec>, 384, ws.smem_total, p, tokens, splits);
    const Run two = run(decode_kernel_ws_pair<WsSpec>, 384, ws.smem_total, p, tokens, splits);
    size_t pair_differ = 0;  // output and LSE bits of the paired kernel against the unpaired one
    for (size_t i = 0; i < one.out.size(); ++i) pair_differ += one.out[i] != two.out[i];
    for (size_t i = 0; i < one.lse.size(); ++i) pair_differ += std::memcmp(&one.lse[i], &two.lse[i], 4) != 0;
    for (const Run* w : {&one, &two}) {
      const MlaDiff d = compare_mla_outputs(a.out, a.lse, w->out, w->lse);
      const double flops = 2.0 * tokens * 128 * topk * (576 + 512);
      std::printf("%-8d %-6d %-5s %12.1f %12.1f %10.1f %12.2e %12.2e %8zu %12zu%s\n", tokens, splits,
                  w == &two ? "pair" : "one", a.us, w->us, flops / w->us / 1e6, d.rel_out, d.lse_worst, d.differ,
                  pair_differ, d.bad ? "  NON-FINITE OR -inf MISMATCH" : "");
    }
  }
  // One head group per token: how the time scales with the CTA count, 64 tokens, one split.
  p.num_tokens = 64;
  p.num_splits = 1;
  std::printf("ws, one head group per token (64 CTAs) %8.1f us\n",
              run(decode_kernel_ws<WsSpec>, 384, ws.smem_total, p, 64, 1, 1).us);
  std::printf("ws, 128 tokens x one head group (128 CTAs) %8.1f us\n",
              run(decode_kernel_ws<WsSpec>, 384, ws.smem_total, p, 128, 1, 1).us);
  return 0;
}
