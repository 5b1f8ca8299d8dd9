#include "sparse_mla_decode/workload_rows.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

#include "common/numerics.cuh"

namespace ktune::autotune {

namespace kc = ::ktune_common;

void encode_mla_row(const mla::Problem& p, std::vector<float>& v, std::mt19937_64& rng, unsigned char* row) {
  std::uniform_real_distribution<float> amp(0.25f, 2.25f);
  const int lat = p.kv_lora_rank, dim = p.dim();
  if (p.kv_format == mla::KvFormat::Fp8DsMla) {
    for (int t = 0; t < lat / 128; ++t) {
      const float a = amp(rng);
      float amax = 0;
      for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(v[t * 128 + i] *= a));
      const float scale = amax / 448.f;
      std::memcpy(row + lat + 4 * t, &scale, 4);
      for (int i = 0; i < 128; ++i) row[t * 128 + i] = kc::float_to_e4m3(v[t * 128 + i] / scale);
    }
    for (int i = 0; i < p.rope_dim; ++i) {
      const uint16_t b = kc::float_to_bf16(v[lat + i]);
      std::memcpy(row + lat + 4 * (lat / 128) + 2 * i, &b, 2);
    }
  } else {
    for (int i = 0; i < dim; ++i) {
      const uint16_t b = kc::float_to_bf16(v[i]);
      std::memcpy(row + 2 * i, &b, 2);
    }
  }
}

}  // namespace ktune::autotune
