// The mxfp4_gemm host tuning workload: one tuning key (problem + bucket m = tokens) on the CPU. Like the GPU
// workload: dense m rows; grouped m * top_k rows routed uniformly at random over the experts (uneven counts as
// in serving), sorted by expert. Weights are random packed bytes (random e2m1 codes) with e8m0 scales in
// 2^-7..2^5, activations N(0,1), never zero. Only the experts that receive rows are filled: the weight buffer is
// allocated zeroed (calloc: untouched pages cost no memory), so a 128-expert problem tuned at a few tokens
// holds a few experts' weights, not 1 GB. Weights and activations are rotated over copies whose total exceeds
// 64 MiB (at most 4) so back-to-back calls do not time a warm last-level cache. Calls run on every hardware
// thread (what a host launch uses by default).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/host_workload.hpp"
#include "common/numerics.cuh"
#include "ktune/error.hpp"
#include "ktune/mxfp4_gemm_host.hpp"
#include "mxfp4_gemm/family.hpp"
#include "mxfp4_gemm/spec.hpp"

namespace ktune::autotune {
namespace {

namespace kc = ::ktune_common;
using mxfp4::Problem;

constexpr size_t kRotateBytes = size_t{64} << 20;
constexpr int kMaxCopies = 4;
constexpr size_t kPoolBytes = size_t{4} << 20;

[[noreturn]] void bad(const std::string& what) { throw Error(Status::invalid_argument, "mxfp4_gemm host workload", what); }

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using ZeroedBytes = std::unique_ptr<unsigned char, FreeDeleter>;

ZeroedBytes zeroed(size_t bytes) {
  void* p = std::calloc(std::max<size_t>(bytes, 64), 1);
  if (!p) throw Error(Status::unsupported, "mxfp4_gemm host workload", fmt::format("cannot allocate {} bytes", bytes));
  return ZeroedBytes(static_cast<unsigned char*>(p));
}

// Copies `pool` over [dst, dst + bytes) at shifting offsets (16-byte granules, so words stay aligned).
void fill_from(unsigned char* dst, size_t bytes, const std::vector<unsigned char>& pool, size_t salt) {
  const size_t half = pool.size() / 2;
  size_t off = 0, i = salt;
  while (off < bytes) {
    const size_t n = std::min(half, bytes - off);
    const size_t src = ((i++ * 7919u * 16u) % half) & ~size_t(15);
    std::memcpy(dst + off, pool.data() + src, n);
    off += n;
  }
}

class Mxfp4HostWorkload final : public Workload {
 public:
  Mxfp4HostWorkload(Runtime& rt, const std::string& problem_key,
                    const std::vector<std::pair<std::string, int64_t>>& buckets)
      : rt_(rt), p_(Problem::from_key(problem_key)) {
    int64_t tokens = 0;
    for (const auto& [dim, value] : buckets) {
      if (dim == "m") tokens = value;
      else bad(fmt::format("unknown bucket '{}' (mxfp4_gemm tunes m = tokens)", dim));
    }
    if (tokens < 1 || tokens > (1 << 16)) bad(fmt::format("bucket m: expected 1..{}, got {}", 1 << 16, tokens));
    rows_ = int(tokens * (p_.grouped() ? p_.top_k : 1));
    allocate();
  }

  void prepare(const std::string& config) override {
    mxfp4_gemm_host_kernel(rt_, p_, chosen(config).config);  // load (or compile) first: timing never includes it
    launch(config, nullptr);                                 // and touch the inputs once
  }

  ChosenConfig chosen(const std::string& config) override {
    const Mxfp4HostPlan plan = mxfp4_gemm_host_plan(rt_, p_, rows_, 0, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void*) override {
    Copy& c = copies_[next_];
    next_ = (next_ + 1) % copies_.size();
    Mxfp4GemmArgs a;
    a.a = c.a.data();
    a.weight = Mxfp4Weight{mxfp4::packed_layout_version(), p_.n, p_.k, p_.num_experts, c.w.get(), c.s.get()};
    a.c = out_.data();
    a.m = rows_;
    a.expert_offsets = p_.grouped() ? offsets_.data() : nullptr;
    a.config = forced_config(config);
    mxfp4_gemm_host(rt_, p_, a, 0);
  }

  double bytes_per_call() const override { return bytes_; }
  double flops_per_call() const override { return 2.0 * rows_ * double(p_.n) * p_.k; }

 private:
  struct Copy {
    ZeroedBytes w, s;
    std::vector<uint16_t> a;
  };

  void allocate() {
    const size_t we = mxfp4::packed_weight_bytes(p_.n, p_.k, 1), se = mxfp4::packed_scale_bytes(p_.n, p_.k, 1);
    const uint64_t seed = std::random_device{}();
    std::mt19937_64 rng(seed);
    std::vector<int> used = {0};
    if (p_.grouped()) {
      std::vector<int> count(size_t(p_.num_experts), 0);
      std::uniform_int_distribution<int> pick(0, p_.num_experts - 1);
      for (int r = 0; r < rows_; ++r) ++count[size_t(pick(rng))];
      offsets_.assign(size_t(p_.num_experts) + 1, 0);
      used.clear();
      for (int e = 0; e < p_.num_experts; ++e) {
        offsets_[e + 1] = offsets_[e] + count[e];
        if (count[e] > 0) used.push_back(e);
      }
    }
    const size_t ab = size_t(rows_) * p_.k * 2, cb = size_t(rows_) * p_.n * 2;
    const size_t used_bytes = used.size() * (we + se);
    bytes_ = double(used_bytes + ab + cb);  // what must move: the weights of the experts in use, A in, C out
    const int copies = std::max(1, std::min<int>(kMaxCopies, int(kRotateBytes / std::max<size_t>(used_bytes + ab, 1)) + 1));

    std::vector<unsigned char> wpool(kPoolBytes), spool(kPoolBytes);
    for (auto& b : wpool) b = static_cast<unsigned char>(rng());
    std::uniform_int_distribution<int> sc(120, 132);
    for (auto& b : spool) b = static_cast<unsigned char>(sc(rng));
    std::normal_distribution<float> nd(0.f, 1.f);
    for (int i = 0; i < copies; ++i) {
      Copy c;
      c.w = zeroed(we * p_.num_experts);
      c.s = zeroed(se * p_.num_experts);
      for (int e : used) {
        fill_from(c.w.get() + size_t(e) * we, we, wpool, 5 * i + e);
        fill_from(c.s.get() + size_t(e) * se, se, spool, 5 * i + e + 1);
      }
      c.a.resize(size_t(rows_) * p_.k);
      for (auto& v : c.a) {
        const float f = nd(rng);
        v = p_.a_dtype == kc::kBF16 ? kc::float_to_bf16(f == 0.f ? 0.5f : f) : kc::float_to_fp16(f == 0.f ? 0.5f : f);
      }
      copies_.push_back(std::move(c));
    }
    out_.assign(size_t(rows_) * p_.n, 0);
  }

  Runtime& rt_;
  Problem p_;
  int rows_ = 0;
  std::vector<Copy> copies_;
  size_t next_ = 0;
  std::vector<int32_t> offsets_;
  std::vector<uint16_t> out_;
  double bytes_ = 0;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::mxfp4 {

std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::Mxfp4HostWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::mxfp4
