// The mxfp4_gemm host tuning workload: the key's rows and expert offsets (workload_inputs.hpp) in host memory, on
// the CPU; random weights and scales, activations N(0,1), never zero. Only the experts that receive rows are
// filled: the weight buffer is allocated zeroed (calloc: untouched pages cost no memory), so a 128-expert problem
// tuned at a few tokens holds a few experts' weights, not 1 GB. Weights and activations are rotated over copies
// whose total exceeds 64 MiB (at most 4) so back-to-back calls do not time a warm last-level cache. Calls run on
// every hardware thread (what a host launch uses by default).
#include <algorithm>
#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/host_workload.hpp"
#include "autotune/rotating_workload.hpp"
#include "autotune/workload_support.hpp"
#include "ktune/error.hpp"
#include "ktune/mxfp4_gemm_host.hpp"
#include "mxfp4_gemm/family.hpp"
#include "mxfp4_gemm/spec.hpp"
#include "mxfp4_gemm/workload_inputs.hpp"

namespace ktune::autotune {
namespace {

namespace ws = workload_support;
using mxfp4::Problem;

constexpr const char* kWho = "mxfp4_gemm host workload";
constexpr int kMaxCopies = 4;
constexpr int64_t kMaxTokens = int64_t{1} << 16;
constexpr size_t kPoolBytes = size_t{4} << 20;

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};
using ZeroedBytes = std::unique_ptr<unsigned char, FreeDeleter>;

ZeroedBytes zeroed(size_t bytes) {
  void* p = std::calloc(std::max<size_t>(bytes, 64), 1);
  if (!p) throw Error(Status::unsupported, kWho, fmt::format("cannot allocate {} bytes", bytes));
  return ZeroedBytes(static_cast<unsigned char*>(p));
}

struct Mxfp4HostCopy {
  ZeroedBytes w, s;
  std::vector<unsigned char> a;
};

class Mxfp4HostWorkload final : public RotatingWorkload<Problem, Mxfp4Inputs, Mxfp4HostCopy> {
 public:
  Mxfp4HostWorkload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets)
      : RotatingWorkload(rt, problem_key, [&](const Problem& p, uint64_t seed) {
          return mxfp4_inputs(p, buckets, kWho, kMaxTokens, false, seed);
        }) {
    allocate();
  }

  void prepare(const std::string& config) override {
    mxfp4_gemm_host_kernel(rt_, p_, chosen(config).config);  // load (or compile) first: timing never includes it
    launch(config, nullptr);                                 // and touch the inputs once
  }

  ChosenConfig chosen(const std::string& config) override {
    const Mxfp4HostPlan plan = mxfp4_gemm_host_plan(rt_, p_, in_.rows, 0, forced_config(config));
    return {plan.config, plan.source};
  }

  void launch(const std::string& config, void*) override {
    const Mxfp4HostCopy& c = next_copy();
    Mxfp4GemmArgs a;
    a.a = c.a.data();
    a.weight = Mxfp4Weight{mxfp4::packed_layout_version(), p_.n, p_.k, p_.num_experts, c.w.get(), c.s.get()};
    a.c = out_.data();
    a.m = in_.rows;
    a.expert_offsets = p_.grouped() ? in_.offsets.data() : nullptr;
    a.config = forced_config(config);
    mxfp4_gemm_host(rt_, p_, a, 0);
  }

 private:
  void allocate() {
    const size_t we = in_.expert_weight_bytes, se = in_.expert_scale_bytes;
    // The bytes a copy touches: the experts' pages no row routes to are zeroed by calloc and never written.
    const int copies = ws::host_copies(in_.experts_used.size() * (we + se) + in_.a_bytes, in_.c_bytes, kMaxCopies,
                                       kWho, fmt::format("{} m{}", p_.key(), in_.rows));
    const Mxfp4WeightPools pools = mxfp4_weight_pools(kPoolBytes, seed_ + 1);
    for (int i = 0; i < copies; ++i) {
      Mxfp4HostCopy c;
      c.w = zeroed(we * p_.num_experts);
      c.s = zeroed(se * p_.num_experts);
      for (int e : in_.experts_used) {
        ws::tile_pool(c.w.get() + size_t(e) * we, we, pools.weight, 16, 5 * i + e);
        ws::tile_pool(c.s.get() + size_t(e) * se, se, pools.scale, 16, 5 * i + e + 1);
      }
      c.a = ws::random_values(p_.a_dtype, in_.a_bytes / 2, seed_ + 2 + i);
      copies_.push_back(std::move(c));
    }
    out_.assign(in_.c_bytes / 2, 0);
  }

  std::vector<uint16_t> out_;
};

}  // namespace

}  // namespace ktune::autotune

namespace ktune::mxfp4 {

std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                  const TuningBuckets& buckets) {
  return std::make_unique<autotune::Mxfp4HostWorkload>(rt, problem_key, buckets);
}

}  // namespace ktune::mxfp4
