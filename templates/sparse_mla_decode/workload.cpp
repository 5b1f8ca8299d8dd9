// The sparse_mla_decode tuning workload on the current device: the key's inputs (workload_inputs.hpp) in device
// memory. Q, KV and outputs are rotated over enough copies that their total exceeds 2x L2, so back-to-back
// launches gather from HBM. Values are random (never zeros); fp8_ds_mla rows carry real per-tile scales.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/rotating_workload.hpp"
#include "autotune/workload_support.hpp"
#include "common/numerics.cuh"
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

struct SparseMlaCopy {
  internal::DeviceBuffer q, kv, out;
};

class SparseMlaWorkload final : public RotatingWorkload<Problem, MlaInputs, SparseMlaCopy> {
 public:
  SparseMlaWorkload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : RotatingWorkload(rt, problem_key,
                         [&](const Problem& p, uint64_t seed) { return mla_inputs(p, buckets, kWho, seed); }) {
    allocate();
  }

  void prepare(const std::string& config) override {
    ws::grow_workspace(workspace_, plan(forced_config(config)).workspace_bytes, args_, kAlloc);
    launch(config, nullptr);  // loads (or compiles) the kernel; timing never includes it
    internal::synchronize_device("sparse_mla_decode workload: first call");
  }

  ChosenConfig chosen(const std::string& config) override {
    const SparseMlaDecodePlan p = plan(forced_config(config));
    return {p.config, p.source};
  }

  void launch(const std::string& config, void* stream) override {
    const SparseMlaCopy& c = next_copy();
    SparseMlaDecodeArgs a = args_;
    a.q = c.q.get();
    a.kv_cache = c.kv.get();
    a.out = c.out.get();
    a.config = forced_config(config);
    sparse_mla_decode(rt_, p_, a, stream);
  }

 private:
  // What a call of this key runs with `forced` (null: the engine's choice).
  SparseMlaDecodePlan plan(const char* forced) const { return sparse_mla_decode_plan(rt_, p_, in_.num_tokens, forced); }

  void allocate() {
    const double copy_bytes = double(in_.kv_bytes + in_.q_bytes + in_.out_bytes);
    const int copies = ws::gpu_copies(copy_bytes, kMaxCopies, kWho, fmt::format("b{}", in_.batch));
    const std::vector<unsigned char> rows = mla_row_pool(p_, kPoolRows, seed_ + 1);
    const std::vector<unsigned char> q_pool =
        ws::random_values(kc::kBF16, std::max<size_t>(2, std::min<size_t>(in_.q_bytes, 8u << 20) / 2), seed_ + 2);
    for (int i = 0; i < copies; ++i) {
      copies_.push_back(SparseMlaCopy{ws::device_tiled(in_.q_bytes, q_pool, 2, 3 * i + 1, kAlloc),
                                      ws::device_tiled(in_.kv_bytes, rows, p_.row_bytes(), 3 * i, kAlloc),
                                      internal::DeviceBuffer(in_.out_bytes, kAlloc)});
    }

    indices_ = ws::device_copy(in_.indices, kAlloc);
    lse_ = internal::DeviceBuffer(size_t(in_.num_tokens) * p_.num_heads * sizeof(float), kAlloc);
    args_ = in_.args;
    args_.indices = static_cast<const int32_t*>(indices_.get());
    args_.lse = static_cast<float*>(lse_.get());

    // Workspace for the largest split count any candidate config plans for this bucket.
    const auto planned = [this](const char* config) { return plan(config).workspace_bytes; };
    ws::grow_workspace(workspace_, ws::largest_candidate_workspace(p_, rt_.current_arch(), planned), args_, kAlloc);
  }

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
