#include "sparse_mla_decode/workload_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

#include <fmt/format.h>

#include "autotune/workload_support.hpp"
#include "common/numerics.cuh"
#include "ktune/error.hpp"

namespace ktune::autotune {

namespace kc = ::ktune_common;

MlaInputs mla_inputs(const mla::Problem& p, const TuningBuckets& buckets, const char* who, uint64_t seed) {
  const auto b = workload_support::read_buckets(buckets, who, {"b"}, "sparse_mla_decode tunes b = requests");
  const int64_t batch = b.count("b") ? b.at("b") : 0;
  if (batch < 1) throw Error(Status::invalid_argument, who, fmt::format("bucket b: expected >= 1, got {}", batch));
  if (batch * p.max_q_len > 65535)
    throw Error(Status::invalid_argument, who,
                fmt::format("bucket b: {} requests x max_q_len {} exceed 65535 tokens", batch, p.max_q_len));
  MlaInputs in;
  in.batch = static_cast<int>(batch);
  in.num_tokens = in.batch * p.max_q_len;

  const int H = p.num_heads, dim = p.dim(), lat = p.kv_lora_rank, P = p.page_size;
  const int64_t region = int64_t{4} * p.topk;
  const int64_t pages_per_req = (region + P - 1) / P;
  const int64_t num_pages = pages_per_req * in.batch;
  in.kv_bytes = size_t(num_pages) * P * p.row_bytes();
  in.q_bytes = size_t(in.num_tokens) * H * dim * 2;
  in.out_bytes = size_t(in.num_tokens) * H * lat * 2;
  in.bytes_per_call = double(in.num_tokens) * p.topk * p.row_bytes() + double(in.q_bytes) + double(in.out_bytes) +
                      double(in.num_tokens) * H * 4;
  in.flops_per_call = 2.0 * in.num_tokens * H * double(p.topk) * (dim + lat);

  std::mt19937_64 rng(seed);
  in.indices.resize(size_t(in.num_tokens) * p.topk);
  std::vector<int32_t> region_slots(static_cast<size_t>(region));
  for (int t = 0; t < in.num_tokens; ++t) {
    const int64_t base = int64_t{t / p.max_q_len} * pages_per_req * P;
    std::iota(region_slots.begin(), region_slots.end(), static_cast<int32_t>(base));
    for (int k = 0; k < p.topk; ++k) {  // a partial Fisher-Yates shuffle: topk distinct slots
      const size_t j = k + rng() % (region_slots.size() - k);
      std::swap(region_slots[k], region_slots[j]);
      in.indices[size_t(t) * p.topk + k] = region_slots[k];
    }
  }

  SparseMlaDecodeArgs& a = in.args;
  a.num_tokens = in.num_tokens;
  a.num_pages = num_pages;
  a.softmax_scale = 1.f / std::sqrt(float(dim));
  return in;
}

std::vector<unsigned char> mla_row_pool(const mla::Problem& p, int rows, uint64_t seed) {
  const int lat = p.kv_lora_rank, dim = p.dim(), rb = p.row_bytes();
  std::vector<unsigned char> pool(size_t(rows) * rb);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_real_distribution<float> amp(0.25f, 2.25f);
  std::vector<float> v(dim);
  for (int r = 0; r < rows; ++r) {
    unsigned char* row = pool.data() + size_t(r) * rb;
    for (float& x : v) {
      x = normal(rng);
      if (x == 0.f) x = 0.5f;
    }
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
        const uint16_t h = kc::float_to_bf16(v[lat + i]);
        std::memcpy(row + lat + 4 * (lat / 128) + 2 * i, &h, 2);
      }
    } else {
      for (int i = 0; i < dim; ++i) {
        const uint16_t h = kc::float_to_bf16(v[i]);
        std::memcpy(row + 2 * i, &h, 2);
      }
    }
  }
  return pool;
}

}  // namespace ktune::autotune
