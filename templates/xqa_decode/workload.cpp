// The xqa_decode tuning workload on the current device: the key's inputs (workload_inputs.hpp) in device memory.
// KV, Q and outputs are rotated over enough copies that their total exceeds 2x L2, so back-to-back launches
// stream from HBM; values are random (never zeros), a seeded pool tiled over each buffer.
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
#include "ktune/xqa_decode.hpp"
#include "ktune_internal/gpu.hpp"
#include "xqa_decode/family.hpp"
#include "xqa_decode/spec.hpp"
#include "xqa_decode/workload_inputs.hpp"

namespace ktune::autotune {

namespace {

namespace kc = ::ktune_common;
namespace ws = workload_support;
using xqa::Problem;

constexpr const char* kWho = "xqa_decode workload";
constexpr const char* kAlloc = "cuMemAlloc (xqa_decode workload)";
constexpr int kMaxCopies = 64;
constexpr size_t kPoolBytes = 32u << 20;

class XqaWorkload final : public Workload {
 public:
  XqaWorkload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : rt_(rt), p_(Problem::from_key(problem_key)), seed_(std::random_device{}()),
        in_(xqa_inputs(p_, buckets, kWho, seed_)) {
    allocate();
  }

  void prepare(const std::string& config) override {
    const XqaDecodePlan plan = xqa_decode_plan(rt_, p_, in_.batch, in_.seq_len, forced_config(config));
    grow_workspace(plan.workspace_bytes);
    // One real call loads (or compiles) the kernel; timing never includes it.
    launch(config, nullptr);
    internal::synchronize_device("xqa_decode workload: first call");
  }

  ChosenConfig chosen(const std::string& config) override {
    const XqaDecodePlan plan = xqa_decode_plan(rt_, p_, in_.batch, in_.seq_len, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void* stream) override {
    XqaDecodeArgs a = args_;
    const Copy& c = copies_[next_];
    next_ = (next_ + 1) % copies_.size();
    a.q = c.q.get();
    a.kv_cache = c.kv.get();
    a.out = c.out.get();
    a.config = forced_config(config);
    xqa_decode(rt_, p_, a, stream);
  }

  double bytes_per_call() const override { return in_.bytes_per_call; }
  double flops_per_call() const override { return in_.flops_per_call; }

 private:
  struct Copy {
    internal::DeviceBuffer q, kv, out;
  };

  void allocate() {
    const int kvt = int(p_.kv_dtype), qt = int(p_.q_dtype);
    const double copy_bytes = double(in_.kv_bytes + in_.q_bytes + in_.out_bytes);
    const int copies =
        ws::gpu_copies(copy_bytes, kMaxCopies, kWho, fmt::format("b{} l{}", in_.batch, in_.seq_len));
    const auto pool_of = [](int dtype, size_t bytes, uint64_t seed) {
      const size_t pool_bytes = std::min<size_t>(kPoolBytes, std::max<size_t>(bytes, 4096));
      return ws::random_values(dtype, pool_bytes / kc::dtype_size(dtype), seed);
    };
    const auto kv_pool = pool_of(kvt, in_.kv_bytes, seed_ + 1);
    const auto q_pool = pool_of(qt, in_.q_bytes, seed_ + 2);
    for (int i = 0; i < copies; ++i) {
      copies_.push_back(Copy{ws::device_tiled(in_.q_bytes, q_pool, kc::dtype_size(qt), 3 * i + 1, kAlloc),
                             ws::device_tiled(in_.kv_bytes, kv_pool, kc::dtype_size(kvt), 3 * i, kAlloc),
                             internal::DeviceBuffer(in_.out_bytes, kAlloc)});
    }

    args_ = in_.args;
    block_tables_ = ws::device_copy(in_.block_tables, kAlloc);
    seq_lens_ = ws::device_copy(in_.seq_lens, kAlloc);
    args_.block_tables = static_cast<const int32_t*>(block_tables_.get());
    args_.seq_lens = static_cast<const int32_t*>(seq_lens_.get());
    if (!in_.mask.empty()) {
      mask_ = ws::device_copy(in_.mask, kAlloc);
      args_.mask = static_cast<const uint16_t*>(mask_.get());
    }
    if (!in_.sinks.empty()) {
      sinks_ = ws::device_copy(in_.sinks, kAlloc);
      args_.sinks = static_cast<const float*>(sinks_.get());
    }
    if (p_.write_lse) {
      lse_ = internal::DeviceBuffer(size_t(args_.num_tokens) * p_.num_q_heads * sizeof(float), kAlloc);
      args_.lse = static_cast<float*>(lse_.get());
    }

    // Workspace for the largest split count any candidate config plans for this bucket.
    size_t ws_bytes = 0;
    const Arch arch = rt_.current_arch();
    const DeviceLimits lim = device_limits(internal::current_device_ordinal());
    for (const xqa::Config& c : xqa::search_space(p_, arch))
      if (xqa::can_implement(p_, c, arch, lim).empty())
        ws_bytes = std::max(ws_bytes, xqa_decode_plan(rt_, p_, in_.batch, in_.seq_len, c.key().c_str()).workspace_bytes);
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
  XqaInputs in_;
  std::vector<Copy> copies_;
  size_t next_ = 0;
  internal::DeviceBuffer block_tables_, seq_lens_, mask_, sinks_, lse_, workspace_;
  XqaDecodeArgs args_;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::xqa {

std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets) {
  return std::make_unique<autotune::XqaWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::xqa
