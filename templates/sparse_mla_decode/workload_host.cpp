// The sparse_mla_decode host tuning workload: one tuning key (problem + bucket b = requests) on the CPU. Like
// the GPU workload (sparse_mla_workload.cpp): num_tokens = b * max_q_len; every request owns a region of
// 4 * topk cache slots and each of its tokens selects topk distinct random slots there (no -1: the bucket's
// worst case); values random (never zero), fp8_ds_mla rows with real per-tile scales. The cache and Q are
// rotated over copies whose total exceeds 64 MiB (more than a CPU's last-level cache, at most 4 copies) so
// back-to-back calls do not time a warm cache. Calls run on every hardware thread (a host call's default).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/workload.hpp"
#include "common/numerics.cuh"
#include "ktune/error.hpp"
#include "ktune/sparse_mla_decode_host.hpp"
#include "sparse_mla_decode/family.hpp"
#include "sparse_mla_decode/spec.hpp"
#include "sparse_mla_decode/workload_rows.hpp"

namespace ktune::autotune {
namespace {

namespace kc = ::ktune_common;
using mla::Problem;

constexpr size_t kRotateBytes = size_t{64} << 20;
constexpr int kMaxCopies = 4;
constexpr int kPoolRows = 2048;  // distinct random cache rows, tiled over the whole cache

[[noreturn]] void bad(const std::string& what) {
  throw Error(Status::invalid_argument, "sparse_mla_decode host workload", what);
}

class SparseMlaHostWorkload final : public Workload {
 public:
  SparseMlaHostWorkload(Runtime& rt, const std::string& problem_key,
                        const std::vector<std::pair<std::string, int64_t>>& buckets)
      : rt_(rt), p_(Problem::from_key(problem_key)) {
    for (const auto& [dim, value] : buckets) {
      if (dim == "b") batch_ = static_cast<int>(value);
      else bad(fmt::format("unknown bucket '{}' (sparse_mla_decode tunes b = requests)", dim));
    }
    if (batch_ < 1) bad(fmt::format("bucket b: expected >= 1, got {}", batch_));
    num_tokens_ = batch_ * p_.max_q_len;
    if (num_tokens_ > 65535) bad(fmt::format("bucket b: {} requests x max_q_len {} exceed 65535 tokens", batch_, p_.max_q_len));
    allocate();
  }

  void prepare(const std::string& config) override {
    sparse_mla_decode_host_kernel(rt_, p_, chosen(config).config);  // load (or compile) first: not timed
    launch(config, nullptr);                                        // and touch the inputs once
  }

  ChosenConfig chosen(const std::string& config) override {
    const SparseMlaHostPlan plan = sparse_mla_decode_host_plan(rt_, p_, num_tokens_, 0, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void*) override {
    SparseMlaDecodeArgs a = args_;
    Copy& c = copies_[next_];
    next_ = (next_ + 1) % copies_.size();
    a.q = c.q.data();
    a.kv_cache = c.kv.data();
    a.config = forced_config(config);
    sparse_mla_decode_host(rt_, p_, a, 0);
  }

  double bytes_per_call() const override { return kv_bytes_read_ + q_bytes_ + out_bytes_; }
  double flops_per_call() const override { return flops_; }

 private:
  struct Copy {
    std::vector<uint16_t> q;
    std::vector<unsigned char> kv;
  };

  void allocate() {
    const int H = p_.num_heads, dim = p_.dim(), lat = p_.kv_lora_rank, rb = p_.row_bytes(), P = p_.page_size;
    const int64_t region = int64_t{4} * p_.topk;
    const int64_t pages_per_req = (region + P - 1) / P;
    const int64_t num_pages = pages_per_req * batch_;
    const size_t kv_bytes = size_t(num_pages) * P * rb;
    const size_t q_elems = size_t(num_tokens_) * H * dim;
    q_bytes_ = double(q_elems) * 2;
    out_bytes_ = double(num_tokens_) * H * lat * 2 + double(num_tokens_) * H * 4;
    kv_bytes_read_ = double(num_tokens_) * p_.topk * rb;
    flops_ = 2.0 * num_tokens_ * H * double(p_.topk) * (dim + lat);

    const uint64_t seed = std::random_device{}();
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    const auto nonzero = [&] {
      const float x = normal(rng);
      return x == 0.f ? 0.5f : x;
    };
    std::vector<unsigned char> rows(size_t(kPoolRows) * rb);
    std::vector<float> v(dim);
    for (int r = 0; r < kPoolRows; ++r) {
      for (float& x : v) x = nonzero();
      encode_mla_row(p_, v, rng, rows.data() + size_t(r) * rb);
    }
    const size_t copy_bytes = kv_bytes + size_t(q_bytes_);
    const int copies =
        std::max(1, std::min<int>(kMaxCopies, static_cast<int>(kRotateBytes / std::max<size_t>(copy_bytes, 1)) + 1));
    for (int i = 0; i < copies; ++i) {
      Copy c;
      c.kv.resize(kv_bytes);
      const size_t total_rows = kv_bytes / rb;
      for (size_t r = 0; r < total_rows; ++r)  // whole rows, a different pool row per slot and copy
        std::memcpy(c.kv.data() + r * rb, rows.data() + ((r * 7919u + i * 104729u) % kPoolRows) * rb, rb);
      c.q.resize(q_elems);
      for (auto& x : c.q) x = kc::float_to_bf16(nonzero());
      copies_.push_back(std::move(c));
    }

    // Each token: topk distinct random slots in its request's region.
    indices_.resize(size_t(num_tokens_) * p_.topk);
    std::vector<int32_t> region_slots(static_cast<size_t>(region));
    for (int t = 0; t < num_tokens_; ++t) {
      const int64_t base = int64_t{t / p_.max_q_len} * pages_per_req * P;
      std::iota(region_slots.begin(), region_slots.end(), static_cast<int32_t>(base));
      for (int k = 0; k < p_.topk; ++k) {
        const size_t j = k + rng() % (region_slots.size() - k);
        std::swap(region_slots[k], region_slots[j]);
        indices_[size_t(t) * p_.topk + k] = region_slots[k];
      }
    }
    out_.assign(size_t(num_tokens_) * H * lat, 0);
    lse_.assign(size_t(num_tokens_) * H, 0.f);

    args_ = SparseMlaDecodeArgs{};
    args_.indices = indices_.data();
    args_.out = out_.data();
    args_.lse = lse_.data();
    args_.num_tokens = num_tokens_;
    args_.num_pages = num_pages;
    args_.softmax_scale = 1.f / std::sqrt(float(dim));
  }

  Runtime& rt_;
  Problem p_;
  int batch_ = 0, num_tokens_ = 0;
  std::vector<Copy> copies_;
  size_t next_ = 0;
  std::vector<int32_t> indices_;
  std::vector<uint16_t> out_;
  std::vector<float> lse_;
  SparseMlaDecodeArgs args_;
  double kv_bytes_read_ = 0, q_bytes_ = 0, out_bytes_ = 0, flops_ = 0;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::mla {

std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::SparseMlaHostWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::mla
