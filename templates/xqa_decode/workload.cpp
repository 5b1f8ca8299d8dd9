// The xqa_decode tuning workload on the current device: the key's inputs (workload_inputs.hpp) in device memory.
// KV, Q and outputs are rotated over enough copies that their total exceeds 2x L2, so back-to-back launches
// stream from HBM; values are random (never zeros), a seeded pool tiled over each buffer.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/rotating_workload.hpp"
#include "autotune/workload_support.hpp"
#include "common/numerics.cuh"
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

struct XqaCopy {
  internal::DeviceBuffer q, kv, out;
};

class XqaWorkload final : public RotatingWorkload<Problem, XqaInputs, XqaCopy> {
 public:
  XqaWorkload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : RotatingWorkload(rt, problem_key,
                         [&](const Problem& p, uint64_t seed) { return xqa_inputs(p, buckets, kWho, seed); }) {
    allocate();
  }

  void prepare(const std::string& config) override {
    ws::grow_workspace(workspace_, plan(forced_config(config)).workspace_bytes, args_, kAlloc);
    // One real call loads (or compiles) the kernel; timing never includes it.
    launch(config, nullptr);
    internal::synchronize_device("xqa_decode workload: first call");
  }

  ChosenConfig chosen(const std::string& config) override {
    const XqaDecodePlan p = plan(forced_config(config));
    return {p.config, p.source};
  }

  void launch(const std::string& config, void* stream) override {
    const XqaCopy& c = next_copy();
    XqaDecodeArgs a = args_;
    a.q = c.q.get();
    a.kv_cache = c.kv.get();
    a.out = c.out.get();
    a.config = forced_config(config);
    xqa_decode(rt_, p_, a, stream);
  }

 private:
  // What a call of this key runs with `forced` (null: the engine's choice).
  XqaDecodePlan plan(const char* forced) const { return xqa_decode_plan(rt_, p_, in_.batch, in_.seq_len, forced); }

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
      copies_.push_back(XqaCopy{ws::device_tiled(in_.q_bytes, q_pool, kc::dtype_size(qt), 3 * i + 1, kAlloc),
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
    const auto planned = [this](const char* config) { return plan(config).workspace_bytes; };
    ws::grow_workspace(workspace_, ws::largest_candidate_workspace(p_, rt_.current_arch(), planned), args_, kAlloc);
  }

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
