// The mxfp4_gemm tuning workload: one tuning key (problem + bucket m = tokens) on the current device.
// Dense: m rows. Grouped (MoE): m tokens x top_k rows routed uniformly at random over the experts (a fresh
// multinomial draw, so experts get uneven counts as in serving), sorted by expert, offsets uploaded once. A bench
// may pass `equal_rows` = 1 beside m: the rows are then split evenly over the experts (how a batched-GEMM peer
// such as torch.bmm sees them); the tuner never does.
// Weights are random packed bytes (random e2m1 codes) with e8m0 scales in 2^-10..2^0, where a trained MXFP4
// weight's scales sit (a block's largest |w| over 6), so tuning times the kernel path serving takes (kernel.cuh
// kFold); activations N(0,1). Weights, activations and outputs are rotated over enough copies that their total
// exceeds 2x L2, so back-to-back launches stream from HBM.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/workload.hpp"
#include "common/numerics.cuh"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/mxfp4_gemm.hpp"
#include "ktune_internal/gpu.hpp"
#include "mxfp4_gemm/family.hpp"
#include "mxfp4_gemm/spec.hpp"

namespace ktune::autotune {
namespace {

namespace kc = ::ktune_common;
using mxfp4::Problem;

constexpr int kMaxCopies = 16;

[[noreturn]] void bad(const std::string& what) { throw Error(Status::invalid_argument, "mxfp4_gemm workload", what); }

class Buffer {
 public:
  Buffer() = default;
  explicit Buffer(size_t bytes) : mem_(bytes, "cuMemAlloc (mxfp4_gemm workload)") {}
  void* get() const { return mem_.get(); }
  void upload(const void* src, size_t n, size_t offset = 0) { mem_.upload(src, n, offset); }
  // Fills the buffer from a host pool (repeating it at shifting offsets).
  void fill(const std::vector<unsigned char>& pool) {
    size_t off = 0, i = 0;
    const size_t chunk = pool.size() / 2;
    while (off < mem_.bytes()) {
      const size_t n = std::min(chunk, mem_.bytes() - off);
      const size_t src = ((i++ * 7919u) % chunk) & ~size_t(15);
      upload(pool.data() + src, n, off);
      off += n;
    }
  }

 private:
  internal::DeviceBuffer mem_;
};

class Mxfp4Workload final : public Workload {
 public:
  Mxfp4Workload(Runtime& rt, const std::string& problem_key, const std::vector<std::pair<std::string, int64_t>>& buckets)
      : rt_(rt), p_(Problem::from_key(problem_key)) {
    int64_t tokens = 0;
    for (const auto& [dim, value] : buckets) {
      if (dim == "m") tokens = value;
      else if (dim == "equal_rows") equal_rows_ = value != 0;
      else bad(fmt::format("unknown bucket '{}' (mxfp4_gemm tunes m = tokens)", dim));
    }
    if (tokens < 1 || tokens > (1 << 22)) bad(fmt::format("bucket m: expected 1..{}, got {}", 1 << 22, tokens));
    rows_ = int(tokens * (p_.grouped() ? p_.top_k : 1));
    allocate();
  }

  void prepare(const std::string& config) override {
    launch(config, nullptr);
    internal::synchronize_device("mxfp4_gemm workload: first call");
  }

  ChosenConfig chosen(const std::string& config) override {
    const Mxfp4GemmPlan plan = mxfp4_gemm_plan(rt_, p_, rows_, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void* stream) override {
    const Copy& c = copies_[next_];
    next_ = (next_ + 1) % copies_.size();
    Mxfp4GemmArgs a;
    a.a = c.a.get();
    a.weight = Mxfp4Weight{mxfp4::packed_layout_version(), p_.n, p_.k, p_.num_experts, c.w.get(), c.s.get()};
    a.c = c.c.get();
    a.m = rows_;
    a.expert_offsets = p_.grouped() ? static_cast<const int32_t*>(offsets_.get()) : nullptr;
    a.config = forced_config(config);
    mxfp4_gemm(rt_, p_, a, stream);
  }

  double bytes_per_call() const override { return bytes_; }
  double flops_per_call() const override { return 2.0 * rows_ * double(p_.n) * p_.k; }

 private:
  struct Copy {
    Buffer a, w, s, c;
  };

  void allocate() {
    const size_t wb = mxfp4::packed_weight_bytes(p_.n, p_.k, p_.num_experts);
    const size_t sb = mxfp4::packed_scale_bytes(p_.n, p_.k, p_.num_experts);
    const size_t ab = size_t(rows_) * p_.k * 2, cb = size_t(rows_) * p_.n * 2;
    const uint64_t seed = std::random_device{}();
    std::mt19937_64 rng(seed);
    int experts_used = 1;
    if (p_.grouped()) {
      std::vector<int> count(size_t(p_.num_experts), 0);
      std::uniform_int_distribution<int> pick(0, p_.num_experts - 1);
      for (int r = 0; r < rows_; ++r) ++count[equal_rows_ ? size_t(r % p_.num_experts) : size_t(pick(rng))];
      std::vector<int32_t> off(size_t(p_.num_experts) + 1, 0);
      experts_used = 0;
      for (int e = 0; e < p_.num_experts; ++e) {
        off[e + 1] = off[e] + count[e];
        experts_used += count[e] > 0;
      }
      offsets_ = Buffer(off.size() * 4);
      offsets_.upload(off.data(), off.size() * 4);
    }
    // Bytes that must move: the weights (and scales) of the experts in use, activations in, outputs out.
    bytes_ = double(wb + sb) / p_.num_experts * experts_used + double(ab) + double(cb);

    const DeviceLimits lim = device_limits(internal::current_device_ordinal());
    const double copy_bytes = double(wb + sb + ab + cb);
    int copies = std::min<int>(kMaxCopies, int(2.0 * lim.l2_bytes / copy_bytes) + 1);
    const size_t free_b = internal::device_memory_info().free_bytes;
    const double usable = 0.8 * double(free_b);
    if (copy_bytes > usable)
      throw Error(Status::unsupported, "mxfp4_gemm workload",
                  fmt::format("{} m{} needs {:.2f} GB, {:.2f} GB free", p_.key(), rows_, copy_bytes / 1e9, free_b / 1e9));
    copies = std::max(1, std::min<int>(copies, int(usable / copy_bytes)));

    const size_t pool_bytes = 8u << 20;
    std::vector<unsigned char> wpool(pool_bytes), spool(pool_bytes), apool(pool_bytes);
    for (auto& b : wpool) b = static_cast<unsigned char>(rng());
    std::uniform_int_distribution<int> sc(117, 127);
    for (auto& b : spool) b = static_cast<unsigned char>(sc(rng));
    std::normal_distribution<float> nd(0.f, 1.f);
    for (size_t i = 0; i + 1 < apool.size(); i += 2) {
      const float v = nd(rng);
      const unsigned short h = p_.a_dtype == kc::kBF16 ? kc::float_to_bf16(v == 0.f ? 0.5f : v) : kc::float_to_fp16(v == 0.f ? 0.5f : v);
      apool[i] = static_cast<unsigned char>(h & 0xFF);
      apool[i + 1] = static_cast<unsigned char>(h >> 8);
    }
    for (int i = 0; i < copies; ++i) {
      Copy c{Buffer(ab), Buffer(wb), Buffer(sb), Buffer(cb)};
      c.a.fill(apool);
      c.w.fill(wpool);
      c.s.fill(spool);
      copies_.push_back(std::move(c));
    }
  }

  Runtime& rt_;
  Problem p_;
  int rows_ = 0;
  bool equal_rows_ = false;
  std::vector<Copy> copies_;
  size_t next_ = 0;
  Buffer offsets_;
  double bytes_ = 0;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::mxfp4 {

std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::Mxfp4Workload>(rt, problem_key, buckets);
}

}  // namespace ktune::mxfp4
