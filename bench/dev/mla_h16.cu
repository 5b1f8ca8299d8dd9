// Where the time of a 16-head sparse MLA shard (TP8 of DeepSeek V3.2's 128) goes: the library kernel
// (kernel.cuh, mma.sync path) at 16 heads per CTA, one phase left out at a time through the Spec's kSkip mask
// (kernel.cuh: SkipOf), for the default t32.s1.g16 (8 warps, two CTAs per SM) and the deep-ring t64.s3.g16.w16
// (16 warps, two raw tiles in flight). top-k 2048, fp8_ds_mla, 128 tokens, one split (128 CTAs).
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Itemplates -Ibench/dev bench/dev/mla_h16.cu \
//        -o .devbuild/mla_h16
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <vector>

#include "cuda_check.hpp"
#include "mla_dev_inputs.hpp"
#include "sparse_mla_decode/kernel.cuh"

namespace ktune_mla {
template <int kT, int kS, int kW, int kSkipMask, int kTwoAcc = -1, int kBatch = 1>
struct H16Spec {
  static constexpr int kQkTwoAcc = kTwoAcc, kDequantBatch = kBatch;
  static constexpr int kNumHeads = 16, kLat = 512, kRope = 64, kTopk = 2048, kPageSize = 64;
  static constexpr bool kFp8 = true;
  static constexpr int kMaxQLen = 1;
  static constexpr bool kChecked = false;
  static constexpr int kHeadsPerCta = 16, kTile = kT, kStages = kS, kWarps = kW;
  static constexpr bool kWgmma = false;
  static constexpr int kSkip = kSkipMask;
};
}  // namespace ktune_mla
using namespace ktune_mla;

template <int kT, int kS, int kW, int kSkipMask, int kTwoAcc = -1, int kBatch = 1>
void run(const Params& p, int tokens, const char* cfg, const char* what) {
  using S = H16Spec<kT, kS, kW, kSkipMask, kTwoAcc, kBatch>;
  constexpr Shape sh = Traits<S>::sh;
  allow_smem(decode_kernel<S>, sh.smem_total);
  const dim3 grid(1, p.num_splits, tokens);  // decode kernel only (no combine)
  const double us = median_us([&] { decode_kernel<S><<<grid, sh.threads, sh.smem_total>>>(p); });
  const double bytes = double(tokens) * 2048 * 656;
  std::printf("%-16s without %-34s %8.1f us  %5.2f TB/s of KV\n", cfg, what, us, bytes / us / 1e6);
}

template <int kT, int kS, int kW>
void attribute(const Params& p, int tokens, const char* cfg) {
  run<kT, kS, kW, 0>(p, tokens, cfg, "nothing");
  run<kT, kS, kW, kSkipGather>(p, tokens, cfg, "the gather");
  run<kT, kS, kW, kSkipDequant>(p, tokens, cfg, "the dequantization");
  run<kT, kS, kW, kSkipQK | kSkipSoftmax | kSkipPV>(p, tokens, cfg, "Q K^T, softmax, P V");
  run<kT, kS, kW, kSkipDequant | kSkipQK | kSkipSoftmax | kSkipPV>(p, tokens, cfg, "all but the gather");
  run<kT, kS, kW, kSkipGather | kSkipDequant | kSkipQK | kSkipSoftmax | kSkipPV>(p, tokens, cfg, "everything");
}

int main() {
  const int tokens = 128;
  const MlaDevInputs host = make_mla_dev_inputs(tokens, 2048, 4096, 64, true, 0, -1);
  Params p = upload_mla_dev_inputs(host, 1);
  for (int rep = 0; rep < 2; ++rep) {
    run<32, 1, 8, 0, 0>(p, tokens, "t32.s1.g16", "nothing, one QK accumulator");
    run<32, 1, 8, 0, 1>(p, tokens, "t32.s1.g16", "nothing, two QK accumulators");
    run<64, 3, 16, 0, 0>(p, tokens, "t64.s3.g16.w16", "nothing, one QK accumulator");
    run<64, 3, 16, 0, 1>(p, tokens, "t64.s3.g16.w16", "nothing, two QK accumulators");
    run<64, 3, 16, 0, 1, 2>(p, tokens, "t64.s3.g16.w16", "nothing, two acc, dequant batch 2");
    run<64, 2, 16, 0, 1>(p, tokens, "t64.s2.g16.w16", "nothing, two QK accumulators");
  }
  attribute<64, 3, 16>(p, tokens, "t64.s3.g16.w16");
  // the bench's split plans (64 tokens: 4 splits for t32.s1, 2 for t64) through the library's combine
  for (int splits : {2, 4}) {
    p.num_splits = splits;
    std::printf("64 tokens, %d splits:\n", splits);
    run<32, 1, 8, 0>(p, 64, "t32.s1.g16", "nothing (default)");
    run<64, 3, 16, 0>(p, 64, "t64.s3.g16.w16", "nothing (two acc)");
  }
  return 0;
}
