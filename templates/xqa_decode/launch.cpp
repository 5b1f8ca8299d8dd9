// xqa_decode through the runtime: host validation -> config (forced / tuned / default) -> split plan ->
// Runtime::get -> typed launches. Nothing here reads device memory, allocates or synchronizes.
#include "ktune/xqa_decode.hpp"

#include <array>
#include <cmath>
#include <cstdint>
#include <mutex>
#include <unordered_map>

#include <fmt/format.h>

#include "driver_api.hpp"
#include "launch_support.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/launch.hpp"
#include "ktune/tuning.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "xqa_decode/params.h"

namespace ktune {
namespace {

namespace kc = ::ktune_common;
using xqa::Config;
using xqa::MaskKind;
using xqa::Problem;

constexpr const char* kFamily = "xqa_decode";
constexpr int kMaxForcedSplits = 1024;

[[noreturn]] void bad(const std::string& field, const std::string& expected, const std::string& got) {
  launch_support::bad_arg(kFamily, field, expected, got);
}
using launch_support::ptr_text;

void need_ptr(const void* p, const char* field, size_t align) { launch_support::need_device_ptr(kFamily, p, field, align); }

void need_null(const void* p, const char* field, const char* why) {
  if (p) bad(field, fmt::format("null ({})", why), ptr_text(p));
}

void need_positive(float v, const char* field) {
  if (!std::isfinite(v) || !(v > 0.f)) bad(field, "a finite value > 0", fmt::format("{}", v));
}

using launch_support::DeviceFacts;
const DeviceFacts& current_device() { return launch_support::current_device(kFamily); }

// Split plans and config checks are pure functions of (device, problem, config, batch, l bucket): memoized so
// the steady state of a launch is a few hash lookups.
struct PlanMemo {
  std::mutex mutex;
  std::unordered_map<std::string, int> splits;        // key -> planned splits
  std::unordered_map<std::string, std::string> why;   // "ordinal|problem|config" -> can_implement result
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
  std::string why = xqa::can_implement(p, c, dev.arch, dev.limits);
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.why.emplace(key, why).first->second;
}

int planned_splits(const Problem& p, const std::string& problem_key, const Config& c, const std::string& config_key,
                   int batch, int64_t l_bucket, const DeviceFacts& dev) {
  const std::string key = fmt::format("{}|{}|{}|{}|{}", dev.ordinal, problem_key, config_key, batch, l_bucket);
  PlanMemo& m = memo();
  {
    std::lock_guard<std::mutex> lock(m.mutex);
    auto it = m.splits.find(key);
    if (it != m.splits.end()) return it->second;
  }
  const int s = xqa::choose_num_splits(p, c, batch, static_cast<int>(l_bucket), dev.limits);
  std::lock_guard<std::mutex> lock(m.mutex);
  return m.splits.emplace(key, s).first->second;
}

Config parse_config(const char* key) {
  return launch_support::parse_forced_config<Config>(
      kFamily, key, "a config key t<tokens_per_tile>.s<stages>.w<warps>[.m<m_tiles>], e.g. t64.s3.w4");
}

void check_forced_splits(int num_splits) {
  if (num_splits < 0 || num_splits > kMaxForcedSplits)
    bad("num_splits", fmt::format("0 (planned) or 1..{}", kMaxForcedSplits), std::to_string(num_splits));
}

void check_workspace(const Problem& p, const Config& c, const XqaDecodeArgs& a, int splits) {
  if (splits <= 1) return;
  const size_t need = xqa::workspace_bytes(p, c, a.batch, splits);
  if (!a.workspace)
    bad("workspace", fmt::format("a device pointer of >= {} bytes ({} splits)", need, splits), "null");
  if (reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0)
    bad("workspace", "a 16-byte aligned device pointer", ptr_text(a.workspace));
  if (a.workspace_bytes < need)
    bad("workspace_bytes", fmt::format(">= {} ({} splits; see xqa_decode_workspace_bytes)", need, splits),
        std::to_string(a.workspace_bytes));
}

struct Resolved {
  Config config;
  std::string config_key;
  std::string source;
  int splits = 1;
  const DeviceFacts* dev = nullptr;
};

// Config and split count for a validated problem. Touches the driver (current context) unless both are forced
// and `need_device` is false (planning without a GPU).
Resolved resolve(Runtime& rt, const Problem& p, const std::string& problem_key, int batch, int max_seq_len,
                 const char* forced_config, int forced_splits, bool need_device) {
  Resolved r;
  const int64_t l_bucket = bucket_pow2_ceil(max_seq_len);
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
    const std::string tkey = tuning_key(problem_key, {{"b", bucket_pow2_ceil(batch)}, {"l", l_bucket}});
    r.config = launch_support::tuned_or_default<Config>(
        kFamily, tkey, rt.tuned_config(kFamily, tkey),
        [&](const Config& c) { return can_run(p, problem_key, c, c.key(), *r.dev); },
        [&] { return xqa::default_config(p, r.dev->arch); }, &r.source);
    r.config_key = r.config.key();
  }
  const std::string why = can_run(p, problem_key, r.config, r.config_key, *r.dev);
  if (!why.empty())
    bad("config", fmt::format("a config that can run {} on {}", problem_key, r.dev->arch.str()),
        fmt::format("'{}' ({})", r.config_key, why));
  r.splits = forced_splits > 0 ? forced_splits
                               : planned_splits(p, problem_key, r.config, r.config_key, batch, l_bucket, *r.dev);
  return r;
}

void validate_plan_inputs(const Problem& p, int batch, int max_seq_len) {
  p.validate();
  if (batch < 1 || batch > 65535) bad("batch", "1..65535", std::to_string(batch));
  if (max_seq_len < 1) bad("max_seq_len", "an upper bound of seq_lens >= 1", std::to_string(max_seq_len));
}

}  // namespace

void xqa_decode_validate(const Problem& p, const XqaDecodeArgs& a) {
  p.validate();
  const bool fp8_q = p.q_dtype == kc::kE4M3, fp8_out = p.out_dtype == kc::kE4M3;
  if (a.batch < 1 || a.batch > 65535) bad("batch", "1..65535", std::to_string(a.batch));
  need_ptr(a.q, "q", fp8_q ? 1 : 2);
  need_ptr(a.kv_cache, "kv_cache", 16);
  need_ptr(a.block_tables, "block_tables", 4);
  need_ptr(a.seq_lens, "seq_lens", 4);
  need_ptr(a.out, "out", fp8_out ? 4 : 8);
  if (a.q_cu_seq_lens) {
    if (reinterpret_cast<uintptr_t>(a.q_cu_seq_lens) % 4 != 0)
      bad("q_cu_seq_lens", "a 4-byte aligned device pointer", ptr_text(a.q_cu_seq_lens));
    const int64_t most = int64_t{a.batch} * p.max_q_len;
    if (a.num_tokens < 0 || a.num_tokens > most)
      bad("num_tokens", fmt::format("0..{} (ragged: at most batch * max_q_len)", most), std::to_string(a.num_tokens));
  } else {
    if (a.q_len_per_req < 1 || a.q_len_per_req > p.max_q_len)
      bad("q_len_per_req", fmt::format("1..{} (problem max_q_len)", p.max_q_len), std::to_string(a.q_len_per_req));
    const int64_t want = int64_t{a.batch} * a.q_len_per_req;
    if (a.num_tokens != want)
      bad("num_tokens", fmt::format("exactly batch * q_len_per_req = {} (uniform form; pass q_cu_seq_lens for ragged)", want),
          std::to_string(a.num_tokens));
  }
  if (p.mask == MaskKind::Explicit) {
    if (!a.mask) bad("mask", "the explicit draft mask (problem mask is explicit)", "null");
    if (reinterpret_cast<uintptr_t>(a.mask) % 4 != 0) bad("mask", "a 4-byte aligned device pointer", ptr_text(a.mask));
  } else {
    need_null(a.mask, "mask", p.mask == MaskKind::Causal ? "problem mask is causal" : "problem has no mask");
  }
  if (p.has_sinks) need_ptr(a.sinks, "sinks", 4);
  else need_null(a.sinks, "sinks", "problem has no sinks");
  if (p.write_lse) need_ptr(a.lse, "lse", 4);
  else need_null(a.lse, "lse", "problem does not write lse");
  if (p.sliding_window) {
    if (a.window_left < 0) bad("window_left", ">= 0 (problem has a sliding window)", std::to_string(a.window_left));
  } else if (a.window_left != -1) {
    bad("window_left", "-1 (problem has no sliding window)", std::to_string(a.window_left));
  }
  if (p.softcap) {
    need_positive(a.softcap, "softcap");
  } else if (a.softcap != 0.f) {
    bad("softcap", "0 (problem has no softcap)", fmt::format("{}", a.softcap));
  }
  need_positive(a.softmax_scale, "softmax_scale");
  need_positive(a.k_scale, "k_scale");
  need_positive(a.v_scale, "v_scale");
  if (fp8_q) need_positive(a.q_scale, "q_scale");
  if (fp8_out) need_positive(a.o_scale, "o_scale");
  if (a.max_seq_len < 1) bad("max_seq_len", "an upper bound of seq_lens >= 1", std::to_string(a.max_seq_len));
  if (a.max_pages_per_req < 1) bad("max_pages_per_req", ">= 1", std::to_string(a.max_pages_per_req));
  if (int64_t{a.max_pages_per_req} * p.page_size < a.max_seq_len)
    bad("max_pages_per_req", fmt::format("max_pages_per_req * page_size ({} * {}) >= max_seq_len ({})",
                                         a.max_pages_per_req, p.page_size, a.max_seq_len),
        std::to_string(a.max_pages_per_req));
  if (a.num_pages < 1) bad("num_pages", ">= 1", std::to_string(a.num_pages));
  check_forced_splits(a.num_splits);
  if (a.config && a.num_splits > 0) check_workspace(p, parse_config(a.config), a, a.num_splits);
  else if (a.config) parse_config(a.config);
}

XqaDecodePlan xqa_decode_plan(Runtime& rt, const Problem& problem, int batch, int max_seq_len, const char* config,
                              int num_splits) {
  Problem p = problem;
  p.checked = false;  // plans and tuned configs are shared with the checked variant (see xqa_decode)
  validate_plan_inputs(p, batch, max_seq_len);
  check_forced_splits(num_splits);
  const std::string problem_key = p.key();
  const Resolved r = resolve(rt, p, problem_key, batch, max_seq_len, config, num_splits, false);
  XqaDecodePlan plan;
  plan.config = r.config_key;
  plan.source = r.source;
  plan.num_splits = r.splits;
  plan.workspace_bytes = xqa::workspace_bytes(p, r.config, batch, r.splits);
  return plan;
}

size_t xqa_decode_workspace_bytes(Runtime& rt, const Problem& p, int batch, int max_seq_len, const char* config,
                                  int num_splits) {
  return xqa_decode_plan(rt, p, batch, max_seq_len, config, num_splits).workspace_bytes;
}

void xqa_decode(Runtime& rt, const Problem& problem, const XqaDecodeArgs& a, void* stream) {
  if (host_device_current()) return xqa_decode_host(rt, problem, a);  // use_device(kHostDevice): host pointers
  xqa_decode_validate(problem, a);  // host only: throws before any driver call
  // The checked variant (bounds checks on the device) is its own binary but shares the unchecked problem's
  // tuned configs and plan: the checks do not change which tile config is fastest enough to tune apart.
  Problem p = problem;
  p.checked = false;
  const std::string problem_key = p.key();
  const Resolved r = resolve(rt, p, problem_key, a.batch, a.max_seq_len, a.config, a.num_splits, true);
  check_workspace(p, r.config, a, r.splits);
  p.checked = problem.checked || rt.options().checked;

  const Arch arch = r.dev->arch;
  // ".chk" is always the key's last flag, so the checked key needs no second Problem::key() on this hot path.
  const std::string fast_key =
      std::string(kFamily) + "/" + problem_key + (p.checked ? ".chk/" : "/") + r.config_key;
  const LoadedKernel& kernel = rt.get(fast_key, [&] { return xqa::generate(p, r.config, arch); });

  ktune_xqa::Params prm{};
  prm.q = a.q;
  prm.kv_cache = a.kv_cache;
  prm.block_tables = a.block_tables;
  prm.seq_lens = a.seq_lens;
  prm.q_cu_seq_lens = a.q_cu_seq_lens;
  prm.mask = a.mask;
  prm.sinks = a.sinks;
  prm.out = a.out;
  prm.lse = a.lse;
  prm.workspace = r.splits > 1 ? static_cast<float*>(a.workspace) : nullptr;
  prm.batch = a.batch;
  prm.num_tokens = a.num_tokens;
  prm.q_len_per_req = a.q_len_per_req;
  prm.max_pages_per_req = a.max_pages_per_req;
  prm.num_pages = a.num_pages;
  prm.bmm1_scale = a.softmax_scale * a.k_scale * (p.q_dtype == kc::kE4M3 ? a.q_scale : 1.f);
  prm.bmm2_scale = a.v_scale / (p.out_dtype == kc::kE4M3 ? a.o_scale : 1.f);
  prm.softcap = p.softcap ? a.softcap : 0.f;
  prm.window_left = p.sliding_window ? a.window_left : -1;
  prm.num_splits = r.splits;
  prm.report = p.checked ? static_cast<ktune_common::DeviceReport*>(rt.device_report()) : nullptr;

  launch(kernel, 0, xqa::decode_dims(p, r.config, a.batch, r.splits), stream, prm);
  if (r.splits > 1) launch(kernel, 1, xqa::combine_dims(p, r.config, a.batch), stream, prm);
}

}  // namespace ktune
