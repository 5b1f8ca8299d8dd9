// The sparse_mla_decode tuning workload on the current device: the key's inputs (workload_inputs.hpp) in device
// memory. Q, KV and outputs are rotated over enough copies that their total exceeds 2x L2, so back-to-back
// launches gather from HBM. Values are random (never zeros); fp8_ds_mla rows carry real per-tile scales.
#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/workload.hpp"
#include "autotune/workload_support.hpp"
#include "common/numerics.cuh"
#include "ktune/device.hpp"
#include "ktune/sparse_mla_decode.hpp"
#include "ktune_internal/gpu.hpp"
#include "sparse_mla_decode/family.hpp"
#include "sparse_mla_decode/spec.hpp"
#include "sparse_mla_decode/workload_inputs.hpp"

namespace ktune::autotune {

namespace {

namespace kc = ::ktune_common;
namespace ws = workload_support;
using mla::Problem;

constexpr const char* kWho = "sparse_mla_decode workload";
constexpr const char* kAlloc = "cuMemAlloc (sparse_mla_decode workload)";
constexpr int kMaxCopies = 64;
constexpr int kPoolRows = 4096;  // distinct random cache rows, tiled over the whole cache

class SparseMlaWorkload final : public Workload {
 public:
  SparseMlaWorkload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : rt_(rt), p_(Problem::from_key(problem_key)), seed_(std::random_device{}()),
        in_(mla_inputs(p_, buckets, kWho, seed_)) {
    allocate();
  }

  void prepare(const std::string& config) override {
    const SparseMlaDecodePlan plan = sparse_mla_decode_plan(rt_, p_, in_.num_tokens, forced_config(config));
    grow_workspace(plan.workspace_bytes);
    launch(config, nullptr);  // loads (or compiles) the kernel; timing never includes it
    internal::synchronize_device("sparse_mla_decode workload: first call");
  }

  ChosenConfig chosen(const std::string& config) override {
    const SparseMlaDecodePlan plan = sparse_mla_decode_plan(rt_, p_, in_.num_tokens, forced_config(config));
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

  double bytes_per_call() const override { return in_.bytes_per_call; }
  double flops_per_call() const override { return in_.flops_per_call; }

 private:
  struct Copy {
    internal::DeviceBuffer q, kv, out;
  };

  void allocate() {
    const double copy_bytes = double(in_.kv_bytes + in_.q_bytes + in_.out_bytes);
    const int copies = ws::gpu_copies(copy_bytes, kMaxCopies, kWho, fmt::format("b{}", in_.batch));
    const std::vector<unsigned char> rows = mla_row_pool(p_, kPoolRows, seed_ + 1);
    const std::vector<unsigned char> q_pool =
        ws::random_values(kc::kBF16, std::max<size_t>(2, std::min<size_t>(in_.q_bytes, 8u << 20) / 2), seed_ + 2);
    for (int i = 0; i < copies; ++i) {
      copies_.push_back(Copy{ws::device_tiled(in_.q_bytes, q_pool, 2, 3 * i + 1, kAlloc),
                             ws::device_tiled(in_.kv_bytes, rows, p_.row_bytes(), 3 * i, kAlloc),
                             internal::DeviceBuffer(in_.out_bytes, kAlloc)});
    }

    indices_ = ws::device_copy(in_.indices, kAlloc);
    lse_ = internal::DeviceBuffer(size_t(in_.num_tokens) * p_.num_heads * sizeof(float), kAlloc);
    args_ = in_.args;
    args_.indices = static_cast<const int32_t*>(indices_.get());
    args_.lse = static_cast<float*>(lse_.get());

    // Workspace for the largest split count any candidate config plans for this bucket.
    size_t ws_bytes = 0;
    const Arch arch = rt_.current_arch();
    const DeviceLimits lim = device_limits(internal::current_device_ordinal());
    for (const mla::Config& c : mla::search_space(p_, arch))
      if (mla::can_implement(p_, c, arch, lim).empty())
        ws_bytes = std::max(ws_bytes, sparse_mla_decode_plan(rt_, p_, in_.num_tokens, c.key().c_str()).workspace_bytes);
    grow_workspace(ws_bytes);
  }

  void grow_workspace(size_t bytes) {
    if (bytes == 0 || (workspace_.get() && bytes <= workspace_.bytes())) return;
    workspace_ = internal::DeviceBuffer(bytes, kAlloc);
    args_.workspace = workspace_.get();
    args_.workspace_bytes = bytes;
  }

  Runtime& rt_;
  Problem p_;
  uint64_t seed_;
  MlaInputs in_;
  std::vector<Copy> copies_;
  size_t next_ = 0;
  internal::DeviceBuffer indices_, lse_, workspace_;
  SparseMlaDecodeArgs args_;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::mla {

std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::SparseMlaWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::mla
