// The sparse_mla_decode host tuning workload: the key's inputs (workload_inputs.hpp) in host memory, on the CPU.
// The cache and Q are rotated over copies whose total exceeds 64 MiB (more than a CPU's last-level cache, at most
// 4 copies) so back-to-back calls do not time a warm cache; values random (never zero), fp8_ds_mla rows with real
// per-tile scales. Calls run on every hardware thread (a host call's default).
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/host_workload.hpp"
#include "autotune/rotating_workload.hpp"
#include "autotune/workload_support.hpp"
#include "common/numerics.cuh"
#include "ktune/sparse_mla_decode_host.hpp"
#include "sparse_mla_decode/family.hpp"
#include "sparse_mla_decode/spec.hpp"
#include "sparse_mla_decode/workload_inputs.hpp"

namespace ktune::autotune {
namespace {

namespace kc = ::ktune_common;
namespace ws = workload_support;
using mla::Problem;

constexpr const char* kWho = "sparse_mla_decode host workload";
constexpr int kMaxCopies = 4;
constexpr int kPoolRows = 2048;  // distinct random cache rows, tiled over the whole cache

struct SparseMlaHostCopy {
  std::vector<unsigned char> q, kv;
};

class SparseMlaHostWorkload final : public RotatingWorkload<Problem, MlaInputs, SparseMlaHostCopy> {
 public:
  SparseMlaHostWorkload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : RotatingWorkload(rt, problem_key, [&](const Problem& p, uint64_t seed) {
          return mla_inputs(p, buckets, kWho, seed);
        }) {
    allocate();
  }

  void prepare(const std::string& config) override {
    sparse_mla_decode_host_kernel(rt_, p_, chosen(config).config);  // load (or compile) first: not timed
    launch(config, nullptr);                                        // and touch the inputs once
  }

  ChosenConfig chosen(const std::string& config) override {
    const SparseMlaHostPlan plan = sparse_mla_decode_host_plan(rt_, p_, in_.num_tokens, 0, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void*) override {
    SparseMlaDecodeArgs a = args_;
    const SparseMlaHostCopy& c = next_copy();
    a.q = c.q.data();
    a.kv_cache = c.kv.data();
    a.config = forced_config(config);
    sparse_mla_decode_host(rt_, p_, a, 0);
  }

 private:
  void allocate() {
    const size_t lse_bytes = size_t(in_.num_tokens) * p_.num_heads * sizeof(float);
    const int copies = ws::host_copies(in_.kv_bytes + in_.q_bytes, in_.out_bytes + lse_bytes, kMaxCopies, kWho,
                                       fmt::format("b{}", in_.batch));
    const std::vector<unsigned char> rows = mla_row_pool(p_, kPoolRows, seed_ + 1);
    for (int i = 0; i < copies; ++i) {
      SparseMlaHostCopy c;
      c.kv.resize(in_.kv_bytes);
      ws::tile_pool(c.kv.data(), c.kv.size(), rows, p_.row_bytes(), 3 * i);
      c.q = ws::random_values(kc::kBF16, in_.q_bytes / 2, seed_ + 2 + i);
      copies_.push_back(std::move(c));
    }
    out_.assign(in_.out_bytes / 2, 0);
    lse_.assign(size_t(in_.num_tokens) * p_.num_heads, 0.f);
    args_ = in_.args;
    args_.indices = in_.indices.data();
    args_.out = out_.data();
    args_.lse = lse_.data();
  }

  std::vector<uint16_t> out_;
  std::vector<float> lse_;
  SparseMlaDecodeArgs args_;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::mla {

std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::SparseMlaHostWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::mla
