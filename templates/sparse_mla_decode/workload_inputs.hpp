// The inputs of one sparse_mla_decode tuning key (problem + bucket b = requests) that the GPU workload
// (workload.cpp) and the host workload (workload_host.cpp) both use: sizes, random cache rows in the problem's
// format, the top-k indices and the call's scalar arguments. num_tokens = b * max_q_len; every request owns a
// region of 4 * topk cache slots and each of its tokens selects topk distinct random slots there (no -1: the
// bucket's worst case).
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "ktune/family.hpp"
#include "ktune/sparse_mla_decode.hpp"
#include "sparse_mla_decode/spec.hpp"

namespace ktune::autotune {

struct MlaInputs {
  int batch = 0, num_tokens = 0;
  size_t kv_bytes = 0, q_bytes = 0, out_bytes = 0;  // one copy of the cache, of Q and of the bf16 output
  double bytes_per_call = 0;                        // the rows gathered + Q + the output and its LSE
  double flops_per_call = 0;
  std::vector<int32_t> indices;  // [num_tokens][topk]
  SparseMlaDecodeArgs args;      // every scalar of the call; no pointer set
};

// Throws Error(invalid_argument, who) naming an unknown bucket or one out of range (b >= 1, b * max_q_len
// tokens at most 65535).
MlaInputs mla_inputs(const mla::Problem& p, const TuningBuckets& buckets, const char* who, uint64_t seed);

// `rows` random cache rows in the problem's format, row_bytes() each: values N(0, 1) (never zero) scaled per
// 128-value tile by a random amplitude; fp8_ds_mla = e4m3 latent with the tile's scale amax / 448, then the fp32
// scales and the bf16 rope part; bf16 = dim() bf16 values.
std::vector<unsigned char> mla_row_pool(const mla::Problem& p, int rows, uint64_t seed);

}  // namespace ktune::autotune
