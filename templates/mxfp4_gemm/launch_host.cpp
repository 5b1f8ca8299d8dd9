// mxfp4_gemm on the host CPU: the GPU call's argument check -> expert-offset check (host memory) -> config
// (forced / tuned on this host / default) -> Runtime::get_host -> row slabs from the (host) expert offsets ->
// (slab, N tile) items over the host pool.
// The host kernel's entry point is void(const ktune_mxfp4::HostWork&, int begin, int end).
#include "ktune/mxfp4_gemm_host.hpp"

#include <algorithm>
#include <vector>

#include <fmt/format.h>

#include "ktune_internal/host_pool.hpp"
#include "ktune/error.hpp"
#include "ktune/tuning.hpp"
#include "launch_support.hpp"
#include "mxfp4_gemm/host_params.h"
#include "mxfp4_gemm/kernel_params.hpp"

namespace ktune {
namespace {

using mxfp4::Config;
using mxfp4::Problem;

constexpr const char* kFamily = "mxfp4_gemm";
using HostEntry = void (*)(const ktune_mxfp4::HostWork&, int, int);

[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) {
  launch_support::bad_arg(kFamily, field, expected, got);
}

Arch host_arch() { return Arch::host_cpu(); }

Config parse_host_config(const char* key) {
  return launch_support::parse_forced_config<Config>(kFamily, key, "a host config key like bm4.tn2.kt4");
}

void check_host_config(const Problem& p, const Config& c) {
  const std::string why = mxfp4::can_implement(p, c, host_arch(), DeviceLimits{});
  if (!why.empty())
    bad("config", fmt::format("a host config that can run {}", p.key()), fmt::format("'{}' ({})", c.key(), why));
}

struct Resolved {
  Config config;
  std::string source, tuning_key;
  int threads = 1;
};

Resolved resolve(Runtime& rt, const Problem& p, int64_t m, int threads, const char* forced) {
  Resolved r;
  r.threads = threads > 0 ? threads : detail::HostPool::hardware_threads();
  r.tuning_key = tuning_key(p.key(), {{"m", mxfp4_gemm_bucket(p, m)}});
  if (forced) {
    r.config = parse_host_config(forced);
    r.source = "forced";
  } else {
    r.config = launch_support::tuned_or_default<Config>(
        kFamily, r.tuning_key, rt.host_tuned_config(kFamily, r.tuning_key),
        [&](const Config& c) { return mxfp4::can_implement(p, c, host_arch(), DeviceLimits{}); },
        [&] { return mxfp4::default_config(p, host_arch()); }, &r.source);
  }
  check_host_config(p, r.config);
  return r;
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
    for (int r = lo; r < hi; r += mxfp4::host_slab_rows()) {
      slabs.push_back(e);
      slabs.push_back(r);
      slabs.push_back(std::min(hi, r + mxfp4::host_slab_rows()));
    }
  };
  if (!p.grouped()) return add_rows(0, 0, m);
  for (int e = 0; e < p.num_experts; ++e) add_rows(e, offsets[e], offsets[e + 1]);
}

}  // namespace

Mxfp4HostPlan mxfp4_gemm_host_plan(Runtime& rt, const Problem& p, int64_t m, int threads, const char* config) {
  p.validate();
  if (m < 0) bad("m", ">= 0 rows", std::to_string(m));
  const Resolved r = resolve(rt, p, m, threads, config);
  return Mxfp4HostPlan{r.config.key(), r.source, r.tuning_key, r.threads};
}

const LoadedKernel& mxfp4_gemm_host_kernel(Runtime& rt, const Problem& p, const std::string& config) {
  p.validate();
  return launch_support::host_kernel(rt, kFamily, p, parse_host_config(config.c_str()));
}

void mxfp4_gemm_host(Runtime& rt, const Problem& p, const Mxfp4GemmArgs& a, int threads) {
  mxfp4_gemm_validate(p, a);
  check_offsets(p, a.m, a.expert_offsets);
  const Resolved r = resolve(rt, p, a.m, threads, a.config);
  const LoadedKernel& kernel = mxfp4_gemm_host_kernel(rt, p, r.config.key());
  if (kernel.functions.empty())
    throw Error(Status::internal, kFamily, fmt::format("{}: the host kernel has no entry point", kernel.name));
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
