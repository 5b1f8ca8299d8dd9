// The mxfp4_gemm tuning workload on the current device: the key's rows and expert offsets
// (workload_inputs.hpp), every expert's random weight and scales, activations N(0,1). Weights, activations and
// outputs are rotated over enough copies that their total exceeds 2x L2, so back-to-back launches stream from HBM.
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/rotating_workload.hpp"
#include "autotune/workload_support.hpp"
#include "common/numerics.cuh"
#include "ktune/mxfp4_gemm.hpp"
#include "ktune_internal/gpu.hpp"
#include "mxfp4_gemm/family.hpp"
#include "mxfp4_gemm/spec.hpp"
#include "mxfp4_gemm/workload_inputs.hpp"

namespace ktune::autotune {
namespace {

namespace ws = workload_support;
using mxfp4::Problem;

constexpr const char* kWho = "mxfp4_gemm workload";
constexpr const char* kAlloc = "cuMemAlloc (mxfp4_gemm workload)";
constexpr int kMaxCopies = 16;
constexpr int64_t kMaxTokens = int64_t{1} << 22;
constexpr size_t kPoolBytes = 8u << 20;

struct Mxfp4Copy {
  internal::DeviceBuffer a, w, s, c;
};

class Mxfp4Workload final : public RotatingWorkload<Problem, Mxfp4Inputs, Mxfp4Copy> {
 public:
  Mxfp4Workload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : RotatingWorkload(rt, problem_key, [&](const Problem& p, uint64_t seed) {
          return mxfp4_inputs(p, buckets, kWho, kMaxTokens, true, seed);
        }) {
    allocate();
  }

  void prepare(const std::string& config) override {
    launch(config, nullptr);  // loads (or compiles) the kernel; timing never includes it
    internal::synchronize_device("mxfp4_gemm workload: first call");
  }

  ChosenConfig chosen(const std::string& config) override {
    const Mxfp4GemmPlan plan = mxfp4_gemm_plan(rt_, p_, in_.rows, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void* stream) override {
    const Mxfp4Copy& c = next_copy();
    Mxfp4GemmArgs a;
    a.a = c.a.get();
    a.weight = Mxfp4Weight{mxfp4::packed_layout_version(), p_.n, p_.k, p_.num_experts, c.w.get(), c.s.get()};
    a.c = c.c.get();
    a.m = in_.rows;
    a.expert_offsets = p_.grouped() ? static_cast<const int32_t*>(offsets_.get()) : nullptr;
    a.config = forced_config(config);
    mxfp4_gemm(rt_, p_, a, stream);
  }

 private:
  void allocate() {
    const size_t wb = in_.expert_weight_bytes * p_.num_experts, sb = in_.expert_scale_bytes * p_.num_experts;
    if (p_.grouped()) {
      offsets_ = ws::device_copy(in_.offsets, kAlloc);
    }
    const double copy_bytes = double(wb + sb + in_.a_bytes + in_.c_bytes);
    const int copies = ws::gpu_copies(copy_bytes, kMaxCopies, kWho, fmt::format("{} m{}", p_.key(), in_.rows));
    const Mxfp4WeightPools pools = mxfp4_weight_pools(kPoolBytes, seed_ + 1);
    const std::vector<unsigned char> a_pool = ws::random_values(p_.a_dtype, kPoolBytes / 2, seed_ + 2);
    for (int i = 0; i < copies; ++i) {
      // 16-byte pieces: packed words stay whole.
      copies_.push_back(Mxfp4Copy{ws::device_tiled(in_.a_bytes, a_pool, 16, 3 * i, kAlloc),
                                  ws::device_tiled(wb, pools.weight, 16, 3 * i + 1, kAlloc),
                                  ws::device_tiled(sb, pools.scale, 16, 3 * i + 2, kAlloc),
                                  internal::DeviceBuffer(in_.c_bytes, kAlloc)});
    }
  }

  internal::DeviceBuffer offsets_;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::mxfp4 {

std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::Mxfp4Workload>(rt, problem_key, buckets);
}

}  // namespace ktune::mxfp4
