// mxfp4_gemm on the host CPU: the GPU call's argument check -> expert-offset check (host memory) -> config
// (templates/host_pipeline.hpp) -> Runtime::get_host -> row slabs from the (host) expert offsets ->
// (slab, N tile) items over the host pool.
// The host kernel's entry point is void(const ktune_mxfp4::HostWork&, int begin, int end).
#include "ktune/mxfp4_gemm_host.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "ktune/error.hpp"
#include "ktune/tuning.hpp"
#include "host_pipeline.hpp"
#include "mxfp4_gemm/host_params.h"
#include "mxfp4_gemm/kernel_params.hpp"

namespace ktune {
namespace {

using mxfp4::Config;
using mxfp4::Problem;

using HostEntry = void (*)(const ktune_mxfp4::HostWork&, int, int);

// The host front end's view of the family (templates/host_pipeline.hpp). The shape is (m, 0); no splits.
struct HostSpec {
  using Problem = mxfp4::Problem;
  using Config = mxfp4::Config;
  static constexpr const char* kFamily = "mxfp4_gemm";
  static constexpr const char* kConfigGrammar = "a host config key like bm4.tn2.kt4";
  static constexpr int kMaxForcedSplits = 0;
  static std::vector<std::pair<std::string, int64_t>> tuning_dims(const Problem& p, const pipeline::Shape& s) {
    return {{"m", mxfp4_gemm_bucket(p, s.a)}};
  }
  static Config default_config(const Problem& p, const Arch& arch, const pipeline::Shape&) {
    return mxfp4::default_config(p, arch);
  }
};

[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) {
  host_pipeline::bad<HostSpec>(field, expected, got);
}

host_pipeline::Resolved<Config> resolve(Runtime& rt, const Problem& p, int64_t m, int threads, const char* forced) {
  return host_pipeline::resolve<HostSpec>(rt, p, {m, 0}, threads, forced, 0);
}

// The expert offsets are host memory here, so they are checked before the kernel reads rows through them:
// 0 <= offsets[0] <= offsets[1] <= ... <= offsets[num_experts] <= m. The first bad entry is named.
void check_offsets(const Problem& p, int m, const int32_t* offsets) {
  if (!p.grouped()) return;
  int32_t prev = 0;
  for (int e = 0; e <= p.num_experts; ++e) {
    if (offsets[e] < prev || offsets[e] > m)
      bad(fmt::format("expert_offsets[{}]", e),
          fmt::format("a row offset in [{}, {}] (non-decreasing, at most m)", prev, m), std::to_string(offsets[e]));
    prev = offsets[e];
  }
}

// Row slabs [expert, first, end) of at most host_slab_rows() rows, from checked offsets.
void make_slabs(const Problem& p, int m, const int32_t* offsets, std::vector<int>& slabs) {
  slabs.clear();
  const auto add_rows = [&](int e, int lo, int hi) {
    // In 64 bits: the last slab's r + rows passes 2^31 - 1 when m is within a slab of it.
    for (int64_t r = lo; r < hi; r += mxfp4::host_slab_rows()) {
      slabs.push_back(e);
      slabs.push_back(static_cast<int>(r));
      slabs.push_back(static_cast<int>(std::min<int64_t>(hi, r + mxfp4::host_slab_rows())));
    }
  };
  if (!p.grouped()) return add_rows(0, 0, m);
  for (int e = 0; e < p.num_experts; ++e) add_rows(e, offsets[e], offsets[e + 1]);
}

}  // namespace

Mxfp4HostPlan mxfp4_gemm_host_plan(Runtime& rt, const Problem& p, int64_t m, int threads, const char* config) {
  p.validate();
  if (m < 0 || m > INT32_MAX) bad("m", ">= 0 rows (at most 2^31 - 1)", std::to_string(m));
  const auto r = resolve(rt, p, m, threads, config);
  return Mxfp4HostPlan{r.config_key, r.source, r.tuning_key, r.threads};
}

const LoadedKernel& mxfp4_gemm_host_kernel(Runtime& rt, const Problem& p, const std::string& config) {
  p.validate();
  return host_pipeline::kernel<HostSpec>(rt, p, config, 1);
}

void mxfp4_gemm_host(Runtime& rt, const Problem& p, const Mxfp4GemmArgs& a, int threads) {
  mxfp4_gemm_validate(p, a);
  check_offsets(p, a.m, a.expert_offsets);
  const auto r = resolve(rt, p, a.m, threads, a.config);
  const LoadedKernel& kernel = mxfp4_gemm_host_kernel(rt, p, r.config_key);
  if (a.m == 0) return;

  thread_local std::vector<int> slabs;  // reused: no allocation per call once warm
  make_slabs(p, a.m, a.expert_offsets, slabs);
  ktune_mxfp4::HostWork hw{};
  hw.p = mxfp4::kernel_params(p, a);
  hw.slabs = slabs.data();
  hw.num_slabs = int(slabs.size() / 3);
  hw.n_tiles = mxfp4::host_n_tiles(p, r.config);
  const long long items = (long long)hw.num_slabs * hw.n_tiles;
  if (items == 0) return;
  if (items > INT32_MAX) bad("m", "a row count whose host work items fit in int32", std::to_string(a.m));
  const HostEntry gemm = reinterpret_cast<HostEntry>(kernel.functions[0]);
  detail::HostPool::instance().run(r.threads, int(items), 1, [&](int begin, int end) { gemm(hw, begin, end); });
}

}  // namespace ktune
