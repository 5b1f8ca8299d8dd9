// The host CPU's launch front end, written once: the config a host call runs (forced, tuned on this host for the
// call's tuning key, or the default), checked against the host, then its split count for the call's threads and
// the workspace that needs. A family's host call (templates/<family>/launch_host.cpp) checks its own arguments
// (host memory can be read, so it also checks the indices a kernel will follow), resolves through here, and
// runs the kernel's work items over the host pool.
//
// HostSpec provides (all static):
//   using Problem, Config;
//   kFamily, kConfigGrammar              the family name and the host config key grammar for errors
//   kMaxForcedSplits                     > 0: the call may split (num_splits 0 = planned, or 1..max); 0: never
//   tuning_dims(p, shape)                the tuning key's buckets: the GPU call's, so one key names both
//   default_config(p, arch, shape)
//   planned_splits(p, c, shape, threads), workspace_bytes(p, c, shape, splits)   where kMaxForcedSplits > 0
// The family's spec namespace provides can_implement(p, c, arch, limits) and generate(p, c, arch), found by
// argument-dependent lookup as in the GPU pipeline.
#pragma once

#include <cstddef>
#include <string>

#include <fmt/format.h>

#include "ktune/host_plan.hpp"
#include "ktune_internal/host_pool.hpp"
#include "launch_support.hpp"
#include "pipeline.hpp"

namespace ktune::host_pipeline {

template <class Config>
struct Resolved {
  Config config;
  std::string config_key;
  std::string source;      // "forced", "tuned" or "default"
  std::string tuning_key;  // the key a tuned config is looked up under (this host's fingerprint)
  int threads = 1;         // threads the call runs on
  int splits = 1;
  size_t workspace_bytes = 0;
};

// What a call resolved to, as a splitting family's *_host_plan reports it.
template <class Config>
HostSplitPlan split_plan(const Resolved<Config>& r) {
  return HostSplitPlan{r.config_key, r.source, r.threads, r.splits, r.workspace_bytes};
}

// The problem a host call tunes and compiles for: the host always checks the indices a kernel will follow (in the
// family's launch_host.cpp), so a checked problem shares the unchecked one's tuned configs and kernels.
template <class Problem>
Problem unchecked(const Problem& p) {
  Problem u = p;
  u.checked = false;
  u.validate();
  return u;
}

template <class Spec>
[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) {
  launch_support::bad_arg(Spec::kFamily, field, expected, got);
}

// A call's work-item count as the pool's int: a count past 2^31 - 1 (a huge batch of a huge problem) is refused
// naming `field`, rather than wrapping to a negative count that runs nothing and reports success.
template <class Spec>
int work_items(long long items, const char* field, long long value) {
  if (items > 2147483647LL)
    bad<Spec>(field, "a size whose host work items fit in 32 bits (" + std::to_string(items) + " items)",
              std::to_string(value));
  return static_cast<int>(items);
}

template <class Spec>
typename Spec::Config parse_config(const char* key) {
  return launch_support::parse_forced_config<typename Spec::Config>(Spec::kFamily, key, Spec::kConfigGrammar);
}

// threads <= 0: every hardware thread (a host call's default).
template <class Spec>
Resolved<typename Spec::Config> resolve(Runtime& rt, const typename Spec::Problem& p, const pipeline::Shape& s,
                                        int threads, const char* forced, int forced_splits) {
  using Config = typename Spec::Config;
  if constexpr (Spec::kMaxForcedSplits > 0) {
    if (forced_splits < 0 || forced_splits > Spec::kMaxForcedSplits)
      bad<Spec>("num_splits", fmt::format("0 (planned) or 1..{}", Spec::kMaxForcedSplits), std::to_string(forced_splits));
  }
  const Arch host = Arch::host_cpu();
  Resolved<Config> r;
  r.threads = threads > 0 ? threads : detail::HostPool::hardware_threads();
  r.tuning_key = tuning_key(p.key(), Spec::tuning_dims(p, s));
  if (forced) {
    r.config = parse_config<Spec>(forced);
    r.source = "forced";
  } else {
    r.config = launch_support::tuned_or_default<Config>(
        Spec::kFamily, r.tuning_key, rt.host_tuned_config(Spec::kFamily, r.tuning_key),
        [&](const Config& c) { return can_implement(p, c, host, DeviceLimits{}); },
        [&] { return Spec::default_config(p, host, s); }, &r.source);
  }
  r.config_key = r.config.key();
  const std::string why = can_implement(p, r.config, host, DeviceLimits{});
  if (!why.empty())
    bad<Spec>("config", fmt::format("a host config that can run {}", p.key()), fmt::format("'{}' ({})", r.config_key, why));
  if constexpr (Spec::kMaxForcedSplits > 0) {
    r.splits = forced_splits > 0 ? forced_splits : Spec::planned_splits(p, r.config, s, r.threads);
    r.workspace_bytes = Spec::workspace_bytes(p, r.config, s, r.splits);
  }
  return r;
}

// The host kernel of (problem, config key), linked in process (launch_support::host_kernel), with at least
// `entry_points` functions: an Error(internal) names a kernel that has fewer, before any is called.
template <class Spec>
const LoadedKernel& kernel(Runtime& rt, const typename Spec::Problem& p, const std::string& config,
                           size_t entry_points) {
  const LoadedKernel& k = launch_support::host_kernel(rt, Spec::kFamily, p, parse_config<Spec>(config.c_str()));
  if (k.functions.size() < entry_points)
    throw Error(Status::internal, Spec::kFamily,
                fmt::format("{}: expected {} host entry point{}, got {}", k.name, entry_points,
                            entry_points == 1 ? "" : "s", k.functions.size()));
  return k;
}

}  // namespace ktune::host_pipeline
