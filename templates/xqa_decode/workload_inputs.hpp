// The inputs of one xqa_decode tuning key (problem + buckets b = batch, l = seq_len) that the GPU workload
// (workload.cpp) and the host workload (workload_host.cpp) both use: sizes, the host-side index arrays and the
// call's scalar arguments. Every request holds exactly l KV tokens and max_q_len query tokens (the bucket's
// worst case) over a shuffled block table.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "ktune/family.hpp"
#include "ktune/xqa_decode.hpp"
#include "xqa_decode/spec.hpp"

namespace ktune::autotune {

struct XqaInputs {
  int batch = 0, seq_len = 0;
  size_t kv_bytes = 0, q_bytes = 0, out_bytes = 0;  // one copy of the cache, of Q and of the output
  double bytes_per_call = 0;                        // KV the call reads (a sliding window reads less) + Q + out
  double flops_per_call = 0;
  std::vector<int32_t> block_tables;  // [batch][pages per request]: a permutation of the pages
  std::vector<int32_t> seq_lens;      // every request l
  std::vector<uint16_t> mask;         // explicit-mask problems: causal with random visible draft keys; else empty
  std::vector<float> sinks;           // problems with sinks: one per query head in [-1, 3]; else empty
  XqaDecodeArgs args;                 // every scalar of the call; no pointer set
};

// Throws Error(invalid_argument, who) naming an unknown bucket or one out of range (b 1..65535, l >= 1).
XqaInputs xqa_inputs(const xqa::Problem& p, const TuningBuckets& buckets, const char* who, uint64_t seed);

}  // namespace ktune::autotune
