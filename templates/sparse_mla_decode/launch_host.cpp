// sparse_mla_decode on the host CPU: argument check (shared with the GPU call) -> index check (host memory can
// be read here, so an out-of-range slot is an error instead of a stray read) -> config (forced / tuned on this
// host / default) -> split plan from the thread count -> Runtime::get_host -> decode items (and combine rows)
// over the host pool. The host kernel's entry points are void(const ktune_mla::Params&, int begin, int end).
#include "ktune/sparse_mla_decode_host.hpp"

#include <algorithm>
#include <cstdint>
#include <vector>

#include <fmt/format.h>

#include "ktune_internal/host_pool.hpp"
#include "ktune/error.hpp"
#include "ktune/tuning.hpp"
#include "launch_support.hpp"
#include "sparse_mla_decode/kernel_params.hpp"

namespace ktune {
namespace {

using mla::Config;
using mla::Problem;

constexpr const char* kFamily = "sparse_mla_decode";
constexpr int kMaxForcedSplits = 64;  // as the GPU call
using HostEntry = void (*)(const ktune_mla::Params&, int, int);

[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) {
  launch_support::bad_arg(kFamily, field, expected, got);
}

Arch host_arch() { return Arch::host_cpu(); }

Config parse_host_config(const char* key) {
  return launch_support::parse_forced_config<Config>(kFamily, key, "a host config key like t32.g16.v16.u2");
}

// Tuned configs and kernels are shared with the checked variant: the host always checks the indices.
Problem unchecked(const Problem& p) {
  Problem u = p;
  u.checked = false;
  u.validate();
  return u;
}

struct Resolved {
  Config config;
  std::string config_key, source;
  int threads = 1, splits = 1;
};

Resolved resolve(Runtime& rt, const Problem& p, int num_tokens, int threads, const char* forced_config,
                 int forced_splits) {
  if (num_tokens < 0 || num_tokens > 65535) bad("num_tokens", "0..65535", std::to_string(num_tokens));
  if (forced_splits < 0 || forced_splits > kMaxForcedSplits)
    bad("num_splits", fmt::format("0 (planned) or 1..{}", kMaxForcedSplits), std::to_string(forced_splits));
  const Arch host = host_arch();
  Resolved r;
  r.threads = threads > 0 ? threads : detail::HostPool::hardware_threads();
  if (forced_config) {
    r.config = parse_host_config(forced_config);
    r.source = "forced";
  } else {
    const std::string tkey = tuning_key(p.key(), {{"b", sparse_mla_decode_batch_bucket(p, num_tokens)}});
    r.config = launch_support::tuned_or_default<Config>(
        kFamily, tkey, rt.host_tuned_config(kFamily, tkey),
        [&](const Config& c) { return mla::can_implement(p, c, host, DeviceLimits{}); },
        [&] { return mla::default_config(p, host); }, &r.source);
  }
  r.config_key = r.config.key();
  const std::string why = mla::can_implement(p, r.config, host, DeviceLimits{});
  if (!why.empty())
    bad("config", fmt::format("a host config that can run {}", p.key()), fmt::format("'{}' ({})", r.config_key, why));
  r.splits = forced_splits > 0 ? forced_splits : mla::choose_num_splits_host(p, r.config, num_tokens, r.threads);
  return r;
}

// Every entry must be -1 or a slot of the cache. The first bad one is named (token, entry, value).
void check_indices(const Problem& p, const SparseMlaDecodeArgs& a) {
  const int64_t slots = a.num_pages * p.page_size;
  const size_t n = size_t(a.num_tokens) * size_t(p.topk);
  for (size_t i = 0; i < n; ++i) {
    const int32_t v = a.indices[i];
    if (v != -1 && (v < 0 || v >= slots))
      bad(fmt::format("indices (token {}, entry {})", i / size_t(p.topk), i % size_t(p.topk)),
          fmt::format("-1 or a slot in [0, {}) (num_pages {} x page_size {})", slots, a.num_pages, p.page_size),
          std::to_string(v));
  }
}

// Split partials when the caller passes no workspace: one buffer per calling thread, grown as needed.
}  // namespace

SparseMlaHostPlan sparse_mla_decode_host_plan(Runtime& rt, const Problem& problem, int num_tokens, int threads,
                                              const char* config, int num_splits) {
  const Problem p = unchecked(problem);
  const Resolved r = resolve(rt, p, std::max(1, num_tokens), threads, config, num_splits);
  SparseMlaHostPlan plan;
  plan.config = r.config_key;
  plan.source = r.source;
  plan.threads = r.threads;
  plan.num_splits = r.splits;
  plan.workspace_bytes = mla::workspace_bytes(p, num_tokens, r.splits);
  return plan;
}

const LoadedKernel& sparse_mla_decode_host_kernel(Runtime& rt, const Problem& problem, const std::string& config) {
  return launch_support::host_kernel(rt, kFamily, unchecked(problem), parse_host_config(config.c_str()));
}

void sparse_mla_decode_host(Runtime& rt, const Problem& problem, const SparseMlaDecodeArgs& a, int threads) {
  {
    SparseMlaDecodeArgs v = a;  // the GPU check, except that a null workspace is allowed (ktune's scratch is used)
    if (!v.workspace) v.num_splits = 0;
    sparse_mla_decode_validate(problem, v);
  }
  if (a.num_tokens == 0) return;
  const Problem p = unchecked(problem);
  check_indices(p, a);
  const Resolved r = resolve(rt, p, a.num_tokens, threads, a.config, a.num_splits);
  const LoadedKernel& kernel = sparse_mla_decode_host_kernel(rt, p, r.config_key);
  if (kernel.functions.size() < 2)
    throw Error(Status::internal, kFamily, fmt::format("{}: expected 2 host entry points, got {}", kernel.name,
                                                       kernel.functions.size()));

  float* workspace = launch_support::host_split_workspace(kFamily, r.splits, mla::workspace_bytes(p, a.num_tokens, r.splits),
                                                          a.workspace, a.workspace_bytes);
  const ktune_mla::Params prm = mla::kernel_params(p, a, r.splits, workspace);  // indices were checked above

  const HostEntry decode = reinterpret_cast<HostEntry>(kernel.functions[0]);
  const HostEntry combine = reinterpret_cast<HostEntry>(kernel.functions[1]);
  detail::HostPool& pool = detail::HostPool::instance();
  pool.run(r.threads, mla::host_decode_items(p, r.config, a.num_tokens, r.splits), 1,
           [&](int begin, int end) { decode(prm, begin, end); });
  if (r.splits > 1)
    pool.run(r.threads, mla::host_combine_items(p, a.num_tokens), 8, [&](int begin, int end) { combine(prm, begin, end); });
}

}  // namespace ktune
