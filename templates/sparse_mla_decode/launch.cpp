// sparse_mla_decode through the runtime: host validation -> config (forced / tuned / default) -> split plan ->
// Runtime::get -> typed launches. Nothing here reads device memory, allocates or synchronizes.
#include "ktune/sparse_mla_decode.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "driver_api.hpp"
#include "launch_support.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/launch.hpp"
#include "ktune/tuning.hpp"
#include "ktune/sparse_mla_decode_host.hpp"
#include "sparse_mla_decode/params.h"

namespace ktune {
namespace {

using mla::Config;
using mla::Problem;

constexpr const char* kFamily = "sparse_mla_decode";
constexpr int kMaxForcedSplits = 64;
constexpr int kMaxTokens = 65535;

[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) {
  launch_support::bad_arg(kFamily, field, expected, got);
}
using launch_support::ptr_text;

void need_ptr(const void* p, const char* field, size_t align) { launch_support::need_device_ptr(kFamily, p, field, align); }

using launch_support::DeviceFacts;
const DeviceFacts& current_device() { return launch_support::current_device(kFamily); }

// Config checks and split plans are pure functions of (device, problem, config, num_tokens): memoized.
struct PlanMemo {
  std::mutex mutex;
  std::unordered_map<std::string, int> splits;
  std::unordered_map<std::string, std::string> why;
};
PlanMemo& memo() {
  static PlanMemo m;
  return m;
}

std::string can_run(const Problem& p, const std::string& problem_key, const Config& c, const std::string& config_key,
                    const DeviceFacts& dev) {
  const std::string key = fmt::format("{}|{}|{}", dev.ordinal, problem_key, config_key);
  PlanMemo& m = memo();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.why.find(key);
    if (it != m.why.end()) return it->second;
  }
  std::string why = mla::can_implement(p, c, dev.arch, dev.limits);
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.why.emplace(key, why).first->second;
}

int planned_splits(const Problem& p, const std::string& problem_key, const Config& c, const std::string& config_key,
                   int num_tokens, const DeviceFacts& dev) {
  const std::string key = fmt::format("{}|{}|{}|{}", dev.ordinal, problem_key, config_key, num_tokens);
  PlanMemo& m = memo();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.splits.find(key);
    if (it != m.splits.end()) return it->second;
  }
  const int s = mla::choose_num_splits(p, c, num_tokens, dev.limits);
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.splits.emplace(key, s).first->second;
}

Config parse_config(const char* key) {
  return launch_support::parse_forced_config<Config>(
      kFamily, key, "a config key t<tokens_per_tile>.s<stages>.g<heads_per_cta>[.w<warps>][.wg], e.g. t64.s2.g64, or t64.s2.g64.ws");
}

void check_forced_splits(int num_splits) {
  if (num_splits < 0 || num_splits > kMaxForcedSplits)
    bad("num_splits", fmt::format("0 (planned) or 1..{}", kMaxForcedSplits), std::to_string(num_splits));
}

void check_workspace(const Problem& p, const SparseMlaDecodeArgs& a, int splits) {
  if (splits <= 1) return;
  const size_t need = mla::workspace_bytes(p, a.num_tokens, splits);
  if (!a.workspace) bad("workspace", fmt::format("a device pointer of >= {} bytes ({} splits)", need, splits), "null");
  if (reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0)
    bad("workspace", "a 16-byte aligned device pointer", ptr_text(a.workspace));
  if (a.workspace_bytes < need)
    bad("workspace_bytes", fmt::format(">= {} ({} splits; see sparse_mla_decode_workspace_bytes)", need, splits),
        std::to_string(a.workspace_bytes));
}

struct Resolved {
  Config config;
  std::string config_key;
  std::string source;
  int splits = 1;
  const DeviceFacts* dev = nullptr;
};

Resolved resolve(Runtime& rt, const Problem& p, const std::string& problem_key, int num_tokens,
                 const char* forced_config, int forced_splits, bool need_device) {
  Resolved r;
  if (forced_config) {
    r.config = parse_config(forced_config);
    r.config_key = r.config.key();
    r.source = "forced";
    if (forced_splits > 0 && !need_device) {
      r.splits = forced_splits;
      return r;
    }
  }
  r.dev = &current_device();
  if (!forced_config) {
    const std::string tkey = tuning_key(problem_key, {{"b", sparse_mla_decode_batch_bucket(p, num_tokens)}});
    r.config = launch_support::tuned_or_default<Config>(
        kFamily, tkey, rt.tuned_config(kFamily, tkey),
        [&](const Config& c) { return can_run(p, problem_key, c, c.key(), *r.dev); },
        [&] { return mla::default_config(p, r.dev->arch); }, &r.source);
    r.config_key = r.config.key();
  }
  const std::string why = can_run(p, problem_key, r.config, r.config_key, *r.dev);
  if (!why.empty())
    bad("config", fmt::format("a config that can run {} on {}", problem_key, r.dev->arch.str()),
        fmt::format("'{}' ({})", r.config_key, why));
  r.splits = forced_splits > 0 ? forced_splits
                               : planned_splits(p, problem_key, r.config, r.config_key, num_tokens, *r.dev);
  return r;
}

void check_num_tokens(int num_tokens) {
  if (num_tokens < 0 || num_tokens > kMaxTokens)
    bad("num_tokens", fmt::format("0..{}", kMaxTokens), std::to_string(num_tokens));
}

}  // namespace

int64_t sparse_mla_decode_batch_bucket(const Problem& p, int num_tokens) {
  const int q = std::max(1, p.max_q_len);
  return bucket_pow2_ceil(std::max(1, (num_tokens + q - 1) / q));
}

void sparse_mla_decode_validate(const Problem& p, const SparseMlaDecodeArgs& a) {
  p.validate();
  check_num_tokens(a.num_tokens);
  need_ptr(a.q, "q", 16);
  need_ptr(a.kv_cache, "kv_cache", 16);
  need_ptr(a.indices, "indices", 4);
  need_ptr(a.out, "out", 4);
  if (a.sinks && reinterpret_cast<uintptr_t>(a.sinks) % 4 != 0)
    bad("sinks", "null or a 4-byte aligned device pointer", ptr_text(a.sinks));
  if (a.lse && reinterpret_cast<uintptr_t>(a.lse) % 4 != 0)
    bad("lse", "null or a 4-byte aligned device pointer", ptr_text(a.lse));
  if (a.num_pages < 1) bad("num_pages", ">= 1", std::to_string(a.num_pages));
  if (a.num_pages > (int64_t{1} << 40) / p.page_size)
    bad("num_pages", fmt::format("at most 2^40 / page_size slots in total"), std::to_string(a.num_pages));
  if (!std::isfinite(a.softmax_scale) || !(a.softmax_scale > 0.f))
    bad("softmax_scale", "a finite value > 0", fmt::format("{}", a.softmax_scale));
  check_forced_splits(a.num_splits);
  if (a.config) parse_config(a.config);
  if (a.config && a.num_splits > 0) check_workspace(p, a, a.num_splits);
}

SparseMlaDecodePlan sparse_mla_decode_plan(Runtime& rt, const Problem& problem, int num_tokens, const char* config,
                                           int num_splits) {
  Problem p = problem;
  p.checked = false;  // plans and tuned configs are shared with the checked variant
  p.validate();
  check_num_tokens(num_tokens);
  check_forced_splits(num_splits);
  const Resolved r = resolve(rt, p, p.key(), std::max(1, num_tokens), config, num_splits, false);
  SparseMlaDecodePlan plan;
  plan.config = r.config_key;
  plan.source = r.source;
  plan.num_splits = r.splits;
  plan.workspace_bytes = mla::workspace_bytes(p, num_tokens, r.splits);
  return plan;
}

size_t sparse_mla_decode_workspace_bytes(Runtime& rt, const Problem& p, int num_tokens, const char* config,
                                         int num_splits) {
  return sparse_mla_decode_plan(rt, p, num_tokens, config, num_splits).workspace_bytes;
}

void sparse_mla_decode(Runtime& rt, const Problem& problem, const SparseMlaDecodeArgs& a, void* stream) {
  if (host_device_current()) return sparse_mla_decode_host(rt, problem, a);  // use_device(kHostDevice)
  sparse_mla_decode_validate(problem, a);  // host only: throws before any driver call
  if (a.num_tokens == 0) return;
  Problem p = problem;
  p.checked = false;  // the checked variant shares the unchecked problem's tuned configs and plan
  const std::string problem_key = p.key();
  const Resolved r = resolve(rt, p, problem_key, a.num_tokens, a.config, a.num_splits, true);
  check_workspace(p, a, r.splits);
  p.checked = problem.checked || rt.options().checked;

  const Arch arch = r.dev->arch;
  // ".chk" is always the key's last token, so the checked key needs no second Problem::key() on this hot path.
  const std::string fast_key =
      std::string(kFamily) + "/" + problem_key + (p.checked ? ".chk/" : "/") + r.config_key;
  const LoadedKernel& kernel = rt.get(fast_key, [&] { return mla::generate(p, r.config, arch); });

  ktune_mla::Params prm{};
  prm.q = a.q;
  prm.kv_cache = a.kv_cache;
  prm.indices = a.indices;
  prm.sinks = a.sinks;
  prm.out = a.out;
  prm.lse = a.lse;
  prm.workspace = r.splits > 1 ? static_cast<float*>(a.workspace) : nullptr;
  prm.num_tokens = a.num_tokens;
  prm.num_splits = r.splits;
  prm.num_slots = a.num_pages * p.page_size;
  prm.softmax_scale = a.softmax_scale;
  prm.report = p.checked ? static_cast<ktune_common::DeviceReport*>(rt.device_report()) : nullptr;

  launch(kernel, 0, mla::decode_dims(p, r.config, a.num_tokens, r.splits), stream, prm);
  if (r.splits > 1) launch(kernel, 1, mla::combine_dims(p, a.num_tokens), stream, prm);
}

}  // namespace ktune
