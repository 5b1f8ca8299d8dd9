// Random sparse_mla_decode cache rows for the tuning workloads (GPU and host): one row in the problem's format.
#pragma once

#include <random>
#include <vector>

#include "sparse_mla_decode/spec.hpp"

namespace ktune::autotune {

// Encodes v (dim() random values, scaled in place per 128-value tile by a random amplitude) as one cache row:
// fp8_ds_mla = e4m3 latent with the per-tile scale amax / 448, then the fp32 scales and the bf16 rope part;
// bf16 = dim() bf16 values. `row` holds row_bytes().
void encode_mla_row(const mla::Problem& p, std::vector<float>& v, std::mt19937_64& rng, unsigned char* row);

}  // namespace ktune::autotune
