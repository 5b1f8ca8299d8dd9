// The inputs of one mxfp4_gemm tuning key (problem + bucket m = tokens) that the GPU workload (workload.cpp) and
// the host workload (workload_host.cpp) both use. Dense: m rows. Grouped (MoE): m tokens x top_k rows routed
// uniformly at random over the experts (a fresh multinomial draw, so experts get uneven counts as in serving),
// sorted by expert. A bench may pass `equal_rows` = 1 beside m where the workload allows it: the rows are then
// split evenly over the experts (how a batched-GEMM peer such as torch.bmm sees them); the tuner never does.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ktune/family.hpp"
#include "mxfp4_gemm/spec.hpp"

namespace ktune::autotune {

struct Mxfp4Inputs {
  int rows = 0;
  std::vector<int32_t> offsets;    // grouped: [num_experts + 1] row offsets; dense: empty
  std::vector<int> experts_used;   // the experts that receive rows ({0} when dense)
  size_t expert_weight_bytes = 0;  // one expert's packed weight, and its scales
  size_t expert_scale_bytes = 0;
  size_t a_bytes = 0, c_bytes = 0;  // activations in, outputs out (16-bit)
  double bytes_per_call = 0;        // the weights and scales of the experts in use + A + C
  double flops_per_call = 0;
};

// m must be in 1..max_tokens and `equal_rows` a bucket only where allow_equal_rows; else Error(invalid_argument,
// who) names it.
Mxfp4Inputs mxfp4_inputs(const mxfp4::Problem& p, const TuningBuckets& buckets, const char* who, int64_t max_tokens,
                         bool allow_equal_rows, uint64_t seed);

// Random packed weight bytes (random e2m1 codes) and e8m0 scales in 2^-10..2^0, where a trained MXFP4 weight's
// scales sit (a block's largest |w| over 6), so tuning times the kernel path serving takes (kernel.cuh kFold):
// `bytes` of each.
struct Mxfp4WeightPools {
  std::vector<unsigned char> weight, scale;
};
Mxfp4WeightPools mxfp4_weight_pools(size_t bytes, uint64_t seed);

}  // namespace ktune::autotune
