#include "mxfp4_gemm/workload_inputs.hpp"

#include <random>
#include <string>

#include <fmt/format.h>

#include "autotune/workload_support.hpp"
#include "ktune/error.hpp"

namespace ktune::autotune {

Mxfp4Inputs mxfp4_inputs(const mxfp4::Problem& p, const TuningBuckets& buckets, const char* who, int64_t max_tokens,
                         bool allow_equal_rows, uint64_t seed) {
  std::vector<std::string> dims = {"m"};
  if (allow_equal_rows) dims.push_back("equal_rows");
  const auto b = workload_support::read_buckets(buckets, who, dims, "mxfp4_gemm tunes m = tokens");
  const int64_t tokens = b.count("m") ? b.at("m") : 0;
  if (tokens < 1 || tokens > max_tokens)
    throw Error(Status::invalid_argument, who, fmt::format("bucket m: expected 1..{}, got {}", max_tokens, tokens));
  const bool equal_rows = b.count("equal_rows") && b.at("equal_rows") != 0;

  Mxfp4Inputs in;
  in.rows = static_cast<int>(tokens * (p.grouped() ? p.top_k : 1));
  in.expert_weight_bytes = mxfp4::packed_weight_bytes(p.n, p.k, 1);
  in.expert_scale_bytes = mxfp4::packed_scale_bytes(p.n, p.k, 1);
  in.a_bytes = size_t(in.rows) * p.k * 2;
  in.c_bytes = size_t(in.rows) * p.n * 2;
  in.experts_used = {0};
  if (p.grouped()) {
    std::mt19937_64 rng(seed);
    std::vector<int> count(size_t(p.num_experts), 0);
    std::uniform_int_distribution<int> pick(0, p.num_experts - 1);
    for (int r = 0; r < in.rows; ++r) ++count[equal_rows ? size_t(r % p.num_experts) : size_t(pick(rng))];
    in.offsets.assign(size_t(p.num_experts) + 1, 0);
    in.experts_used.clear();
    for (int e = 0; e < p.num_experts; ++e) {
      in.offsets[e + 1] = in.offsets[e] + count[e];
      if (count[e] > 0) in.experts_used.push_back(e);
    }
  }
  in.bytes_per_call = double(in.experts_used.size()) * double(in.expert_weight_bytes + in.expert_scale_bytes) +
                      double(in.a_bytes) + double(in.c_bytes);
  in.flops_per_call = 2.0 * in.rows * double(p.n) * p.k;
  return in;
}

Mxfp4WeightPools mxfp4_weight_pools(size_t bytes, uint64_t seed) {
  Mxfp4WeightPools pools{std::vector<unsigned char>(bytes), std::vector<unsigned char>(bytes)};
  std::mt19937_64 rng(seed);
  for (auto& b : pools.weight) b = static_cast<unsigned char>(rng());
  std::uniform_int_distribution<int> e8m0(117, 127);
  for (auto& b : pools.scale) b = static_cast<unsigned char>(e8m0(rng));
  return pools;
}

}  // namespace ktune::autotune
