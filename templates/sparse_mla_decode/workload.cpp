// The sparse_mla_decode tuning workload: one tuning key (problem + bucket b = requests) on the current device.
// num_tokens = b * max_q_len query tokens; every request owns a region of 4 * topk cache slots and each of its
// tokens selects topk distinct random slots there (no -1: the bucket's worst case). Q, KV and outputs are
// rotated over enough copies that their total exceeds 2x L2, so back-to-back launches gather from HBM. Values
// are random (never zeros); fp8_ds_mla rows carry real per-tile scales.
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
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/sparse_mla_decode.hpp"
#include "ktune_internal/gpu.hpp"
#include "sparse_mla_decode/family.hpp"
#include "sparse_mla_decode/spec.hpp"
#include "sparse_mla_decode/workload_rows.hpp"

namespace ktune::autotune {

namespace {

namespace kc = ::ktune_common;
using mla::Problem;

constexpr int kMaxCopies = 64;
constexpr int kPoolRows = 4096;  // distinct random cache rows, tiled over the whole cache

[[noreturn]] void bad(const std::string& what) {
  throw Error(Status::invalid_argument, "sparse_mla_decode workload", what);
}

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : mem_(bytes, "cuMemAlloc (sparse_mla_decode workload)") {}
  void* get() const { return mem_.get(); }
  size_t bytes() const { return mem_.bytes(); }
  void upload(const void* src, size_t n, size_t offset = 0) { mem_.upload(src, n, offset); }
  // Fills the buffer by repeating `pool` (whole rows), starting at a different row per chunk.
  void fill_rows(const std::vector<unsigned char>& pool, size_t row_bytes, uint64_t salt) {
    const size_t rows = pool.size() / row_bytes;
    size_t off = 0, i = 0;
    while (off < bytes()) {
      const size_t start = ((salt + i++ * 7919u) % rows) * row_bytes;
      const size_t n = std::min(pool.size() - start, bytes() - off);
      upload(pool.data() + start, n, off);
      off += n;
    }
  }

 private:
  internal::DeviceBuffer mem_;
};

class SparseMlaWorkload final : public Workload {
 public:
  SparseMlaWorkload(Runtime& rt, const std::string& problem_key,
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
    const SparseMlaDecodePlan plan = sparse_mla_decode_plan(rt_, p_, num_tokens_, forced_config(config));
    grow_workspace(plan.workspace_bytes);
    launch(config, nullptr);  // loads (or compiles) the kernel; timing never includes it
    internal::synchronize_device("sparse_mla_decode workload: first call");
  }

  ChosenConfig chosen(const std::string& config) override {
    const SparseMlaDecodePlan plan = sparse_mla_decode_plan(rt_, p_, num_tokens_, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void* stream) override {
    SparseMlaDecodeArgs a = args_;
    const Copy& c = copies_[next_];
    next_ = (next_ + 1) % copies_.size();
    a.q = c.q.get();
    a.kv_cache = c.kv.get();
    a.out = c.out.get();
    a.config = forced_config(config);
    sparse_mla_decode(rt_, p_, a, stream);
  }

  double bytes_per_call() const override { return kv_bytes_read_ + q_bytes_ + out_bytes_; }
  double flops_per_call() const override { return flops_; }
  int num_tokens() const { return num_tokens_; }

 private:
  struct Copy {
    Buffer q, kv, out;
  };

  void allocate() {
    const int H = p_.num_heads, dim = p_.dim(), lat = p_.kv_lora_rank, rb = p_.row_bytes(), P = p_.page_size;
    const int64_t region = int64_t{4} * p_.topk;
    const int64_t pages_per_req = (region + P - 1) / P;
    const int64_t num_pages = pages_per_req * batch_;
    const size_t kv_bytes = size_t(num_pages) * P * rb;
    q_bytes_ = double(num_tokens_) * H * dim * 2;
    out_bytes_ = double(num_tokens_) * H * lat * 2 + double(num_tokens_) * H * 4;
    kv_bytes_read_ = double(num_tokens_) * p_.topk * rb;
    flops_ = 2.0 * num_tokens_ * H * double(p_.topk) * (dim + lat);

    const DeviceLimits lim = device_limits(internal::current_device_ordinal());
    const double copy_bytes = double(kv_bytes) + q_bytes_ + out_bytes_;
    int copies = std::min<int>(kMaxCopies, static_cast<int>(2.0 * lim.l2_bytes / copy_bytes) + 1);
    const size_t free_b = internal::device_memory_info().free_bytes;
    const double usable = 0.85 * double(free_b);
    if (copy_bytes > usable)
      throw Error(Status::unsupported, "sparse_mla_decode workload",
                  fmt::format("b{} needs {:.2f} GB of inputs, {:.2f} GB free", batch_, copy_bytes / 1e9, free_b / 1e9));
    copies = std::max(1, std::min<int>(copies, static_cast<int>(usable / copy_bytes)));

    const uint64_t seed = std::random_device{}();
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    // A pool of random cache rows in the problem's format (fp8_ds_mla: per-128 tile scale amax / 448).
    std::vector<unsigned char> rows(size_t(kPoolRows) * rb);
    std::vector<float> v(dim);
    for (int r = 0; r < kPoolRows; ++r) {
      unsigned char* row = rows.data() + size_t(r) * rb;
      for (int i = 0; i < dim; ++i) {
        v[i] = normal(rng);
        if (v[i] == 0.f) v[i] = 0.5f;
      }
      encode_mla_row(p_, v, rng, row);
    }
    std::vector<unsigned char> qpool(size_t(std::min<double>(q_bytes_, 8u << 20)) / 2 * 2);
    for (size_t i = 0; i < qpool.size(); i += 2) {
      float x = normal(rng);
      if (x == 0.f) x = 0.5f;
      const uint16_t b = kc::float_to_bf16(x);
      std::memcpy(qpool.data() + i, &b, 2);
    }
    for (int i = 0; i < copies; ++i) {
      Copy c{Buffer(size_t(q_bytes_)), Buffer(kv_bytes), Buffer(size_t(num_tokens_) * H * lat * 2)};
      c.kv.fill_rows(rows, rb, rng());
      c.q.fill_rows(qpool, 2, rng());
      copies_.push_back(std::move(c));
    }

    // Each token: topk distinct random slots in its request's region.
    std::vector<int32_t> idx(size_t(num_tokens_) * p_.topk);
    std::vector<int32_t> region_slots(static_cast<size_t>(region));
    for (int t = 0; t < num_tokens_; ++t) {
      const int64_t base = int64_t{t / p_.max_q_len} * pages_per_req * P;
      std::iota(region_slots.begin(), region_slots.end(), static_cast<int32_t>(base));
      for (int k = 0; k < p_.topk; ++k) {
        const size_t j = k + rng() % (region_slots.size() - k);
        std::swap(region_slots[k], region_slots[j]);
        idx[size_t(t) * p_.topk + k] = region_slots[k];
      }
    }
    indices_ = Buffer(idx.size() * sizeof(int32_t));
    indices_.upload(idx.data(), idx.size() * sizeof(int32_t));
    lse_ = Buffer(size_t(num_tokens_) * H * sizeof(float));

    args_ = SparseMlaDecodeArgs{};
    args_.indices = static_cast<const int32_t*>(indices_.get());
    args_.lse = static_cast<float*>(lse_.get());
    args_.num_tokens = num_tokens_;
    args_.num_pages = num_pages;
    args_.softmax_scale = 1.f / std::sqrt(float(dim));

    size_t ws = 0;
    const Arch arch = rt_.current_arch();
    for (const mla::Config& c : mla::search_space(p_, arch))
      if (mla::can_implement(p_, c, arch, lim).empty())
        ws = std::max(ws, sparse_mla_decode_plan(rt_, p_, num_tokens_, c.key().c_str()).workspace_bytes);
    grow_workspace(ws);
  }

  void grow_workspace(size_t bytes) {
    if (bytes == 0 || (workspace_.get() && bytes <= workspace_.bytes())) return;
    workspace_ = Buffer(bytes);
    args_.workspace = workspace_.get();
    args_.workspace_bytes = bytes;
  }

  Runtime& rt_;
  Problem p_;
  int batch_ = 0, num_tokens_ = 0;
  std::vector<Copy> copies_;
  size_t next_ = 0;
  Buffer indices_, lse_, workspace_;
  SparseMlaDecodeArgs args_;
  double kv_bytes_read_ = 0, q_bytes_ = 0, out_bytes_ = 0, flops_ = 0;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::mla {

std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::SparseMlaWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::mla
