#include "xqa_decode/workload_inputs.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <random>

#include <fmt/format.h>

#include "autotune/workload_support.hpp"
#include "common/mask.cuh"
#include "common/numerics.cuh"
#include "ktune/error.hpp"

namespace ktune::autotune {

namespace {

namespace kc = ::ktune_common;

constexpr int kWindowLeft = 1024;  // sliding-window problems: a typical local-attention window
constexpr float kSoftcap = 30.f;   // softcap problems: Gemma-style cap

[[noreturn]] void bad(const char* who, const std::string& what) { throw Error(Status::invalid_argument, who, what); }

}  // namespace

XqaInputs xqa_inputs(const xqa::Problem& p, const TuningBuckets& buckets, const char* who, uint64_t seed) {
  const auto b = workload_support::read_buckets(buckets, who, {"b", "l"}, "xqa_decode tunes b = batch and l = seq_len");
  const int64_t batch = b.count("b") ? b.at("b") : 0, seq_len = b.count("l") ? b.at("l") : 0;
  if (batch < 1 || batch > 65535) bad(who, fmt::format("bucket b: expected 1..65535, got {}", batch));
  if (seq_len < 1 || seq_len > INT32_MAX) bad(who, fmt::format("bucket l: expected 1..{}, got {}", INT32_MAX, seq_len));
  XqaInputs in;
  in.batch = static_cast<int>(batch);
  in.seq_len = static_cast<int>(seq_len);

  const int D = p.head_dim, HKV = p.num_kv_heads, HQ = p.num_q_heads, P = p.page_size, QL = p.max_q_len;
  const int kv_size = kc::dtype_size(int(p.kv_dtype));
  const int pages_per_req = static_cast<int>((int64_t{in.seq_len} + P - 1) / P);
  const int64_t num_pages = int64_t{in.batch} * pages_per_req;
  const int num_tokens = in.batch * QL;
  in.kv_bytes = size_t(num_pages) * 2 * HKV * P * D * kv_size;
  in.q_bytes = size_t(num_tokens) * HQ * D * kc::dtype_size(int(p.q_dtype));
  in.out_bytes = size_t(num_tokens) * HQ * D * kc::dtype_size(int(p.out_dtype));
  const int window = p.sliding_window ? kWindowLeft : -1;
  const int64_t kv_lo = window >= 0 ? std::max<int64_t>(0, int64_t{in.seq_len} - QL - window) : 0;
  const double tokens_read = double(in.seq_len - kv_lo);
  in.bytes_per_call = double(in.batch) * tokens_read * 2 * HKV * D * kv_size + double(in.q_bytes) + double(in.out_bytes);
  in.flops_per_call = 4.0 * QL * p.group_size() * tokens_read * D * HKV * in.batch;

  std::mt19937_64 rng(seed);
  in.block_tables.resize(static_cast<size_t>(num_pages));
  std::iota(in.block_tables.begin(), in.block_tables.end(), 0);
  std::shuffle(in.block_tables.begin(), in.block_tables.end(), rng);
  in.seq_lens.assign(in.batch, in.seq_len);
  if (p.mask == xqa::MaskKind::Explicit) {
    const int words = kc::draft_mask_words(QL);
    in.mask.assign(size_t(num_tokens) * words * 2, 0);
    std::uniform_int_distribution<int> coin(0, 1);
    for (int r = 0; r < in.batch; ++r)
      for (int i = 0; i < QL; ++i)
        for (int j = 0; j <= i; ++j)
          if (j == i || coin(rng)) kc::draft_mask_set(in.mask.data(), int64_t{r} * QL + i, words, j);
  }
  if (p.has_sinks) {
    in.sinks.resize(HQ);
    std::uniform_real_distribution<float> u(-1.f, 3.f);
    for (float& s : in.sinks) s = u(rng);
  }

  XqaDecodeArgs& a = in.args;
  a.batch = in.batch;
  a.num_tokens = num_tokens;
  a.q_len_per_req = QL;
  a.max_pages_per_req = pages_per_req;
  a.num_pages = num_pages;
  a.max_seq_len = in.seq_len;
  a.softmax_scale = 1.f / std::sqrt(float(D));
  a.softcap = p.softcap ? kSoftcap : 0.f;
  a.window_left = window;
  return in;
}

}  // namespace ktune::autotune
