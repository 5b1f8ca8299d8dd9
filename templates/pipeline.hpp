// The one launch pipeline every family runs through: validate -> resolve (forced, tuned or default config;
// split count; workspace) -> module -> launch. A family supplies only its OpSpec (below) in its launch.cpp and
// instantiates Op<Family> there; nothing of this front end is written per family.
//
// OpSpec<Family> provides (all static):
//   using Config;                        the family's tile config (from_key / key)
//   kConfigGrammar                       the config key grammar for errors
//   kMaxForcedSplits                     > 0: Args has config, num_splits, workspace, workspace_bytes; 0: no split
//   validate_problem(p)                  the static problem (once, at prepare)
//   validate_args(p, a)                  run-time arguments of run() (every call; cheap checks only)
//   validate_shape(p, a)                 the shape fields plan() reads
//   empty(a)                             a call with nothing to do (validated, then returns)
//   shape(p, a) -> pipeline::Shape       what the plan depends on, as plain integers
//   tuning_dims(p, shape)                the tuning key's buckets, e.g. {{"b", 64}, {"l", 4096}}
//   default_config(p, arch, shape), planned_splits(p, c, shape, limits), workspace_bytes(p, c, shape, splits)
//   launch(kernel, p, resolved, a, stream, report)   stream: a LaunchStream (ktune/launch.hpp), passed on to
//                                        ktune::launch
//   kPdl (optional, default false)       true: every entry point calls pdl_wait() before its first global
//                                        access, so Op::set_pdl(true) may launch it programmatically dependent
//   kSharedModule (optional, default false)  true: the kernels no tile config changes (the split-KV combine,
//                                        helpers) are in the problem's shared module (FamilyInfo::has_shared_module),
//                                        which launch() finds in resolved.shared (loaded with the config's)
//   run_host(rt, p, a)                   the host variant (use_device(kHostDevice))
// and derives from SpecBase<OpSpec, Family> (Problem, Args, kFamily = Family::kName; bad / need_ptr). The
// family's spec namespace provides can_implement(p, c, arch, limits) and generate(p, c, arch) (found by
// argument-dependent lookup; generate's p carries the checked flag of the launches), and with kSharedModule
// generate_shared(p, arch).
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>
#include <future>
#include <memory>
#include <mutex>
#include <type_traits>
#include <string>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/launch.hpp"
#include "ktune/op.hpp"
#include "ktune/tuning.hpp"
#include "ktune_internal/context.hpp"
#include "ktune_internal/runtime_access.hpp"
#include "launch_support.hpp"

namespace ktune {
namespace pipeline {

template <class Family>
struct OpSpec;

// What a plan depends on besides the static problem: two integers the family defines (xqa_decode: batch and
// the max_seq_len bucket; sparse_mla_decode: num_tokens; mxfp4_gemm: the row bucket).
struct Shape {
  int64_t a = 0, b = 0;
};

// A resolved call: everything run() needs besides the run-time arguments.
template <class Config>
struct Resolved {
  Config config;
  std::string config_key;
  std::string source;      // "forced", "tuned" or "default"
  std::string tuning_key;  // the key the tuned config was looked up under
  int splits = 1;
  size_t workspace_bytes = 0;
  const internal::DeviceFacts* dev = nullptr;  // null for a device-free plan
  const LoadedKernel* kernel = nullptr;        // null until loaded
  const LoadedKernel* shared = nullptr;        // kSharedModule: the problem's shared module, once loaded
};

// FNV-1a of a forced config key (0 when none): part of the memo key, confirmed by a full compare on a hit.
inline uint64_t text_hash(const char* s) {
  if (!s) return 0;
  uint64_t h = 1469598103934665603ull;
  for (; *s; ++s) h = (h ^ static_cast<unsigned char>(*s)) * 1099511628211ull;
  return h | 1;
}

struct PlanKey {
  void* ctx = nullptr;
  int64_t a = 0, b = 0;
  uint64_t config_hash = 0;
  int splits = 0;
  bool operator==(const PlanKey& o) const {
    return ctx == o.ctx && a == o.a && b == o.b && config_hash == o.config_hash && splits == o.splits;
  }
};
struct PlanKeyHash {
  size_t operator()(const PlanKey& k) const noexcept {
    uint64_t h = reinterpret_cast<uintptr_t>(k.ctx) * 0x9E3779B97F4A7C15ull;
    for (uint64_t v : {uint64_t(k.a), uint64_t(k.b), k.config_hash, uint64_t(uint32_t(k.splits))})
      h = (h ^ v) * 0xBF58476D1CE4E5B9ull + (h >> 31);
    return static_cast<size_t>(h);
  }
};

// Argument errors in the one format, from the family's own OpSpec.
template <class Spec>
struct ArgChecks {
  [[noreturn]] static void bad(const std::string& field, const std::string& expected, const std::string& got) {
    launch_support::bad_arg(Spec::kFamily, field, expected, got);
  }
  static void need_ptr(const void* p, const char* field, size_t align) {
    launch_support::need_device_ptr(Spec::kFamily, p, field, align);
  }
  // A tensor with one row per token: an empty call (no rows, nothing launched) may pass null, since an empty
  // tensor may have no address; any other pointer is checked as need_ptr checks it.
  static void need_rows_ptr(const void* p, bool empty_call, const char* field, size_t align) {
    if (!p && empty_call) return;
    need_ptr(p, field, align);
  }
};

// What every OpSpec derives from: the family's types and name, and its argument errors.
template <class Spec, class Family>
struct SpecBase : ArgChecks<Spec> {
  using Problem = typename Family::Problem;
  using Args = typename Family::Args;
  static constexpr const char* kFamily = Family::kName;
};

template <class Config>
LaunchPlan plan_of(const Resolved<Config>& r) {
  return LaunchPlan{r.config_key, r.source, r.splits, r.workspace_bytes, r.tuning_key};
}

// The forced config and split count of a call (families without splits have neither num_splits nor workspace).
template <class Spec, class Args>
int forced_splits(const Args& a) {
  if constexpr (Spec::kMaxForcedSplits > 0) return a.num_splits;
  else return 0;
}

template <class Spec, class Args>
void check_forced_splits(const Args& a) {
  if constexpr (Spec::kMaxForcedSplits > 0) {
    if (a.num_splits < 0 || a.num_splits > Spec::kMaxForcedSplits)
      Spec::bad("num_splits", fmt::format("0 (planned) or 1..{}", Spec::kMaxForcedSplits), std::to_string(a.num_splits));
  }
}

template <class Spec, class Args, class Config>
void check_workspace(const Args& a, const Resolved<Config>& r) {
  if constexpr (Spec::kMaxForcedSplits > 0) {
    if (r.splits <= 1) return;
    const size_t need = r.workspace_bytes;
    if (!a.workspace)
      Spec::bad("workspace", fmt::format("a device pointer of >= {} bytes ({} splits)", need, r.splits), "null");
    if (reinterpret_cast<uintptr_t>(a.workspace) % 16 != 0)
      Spec::bad("workspace", "a 16-byte aligned device pointer", launch_support::ptr_text(a.workspace));
    if (a.workspace_bytes < need)
      Spec::bad("workspace_bytes", fmt::format(">= {} ({} splits; see {}_workspace_bytes)", need, r.splits, Spec::kFamily),
                std::to_string(a.workspace_bytes));
  }
}

// Families whose kernels may be launched programmatically dependent declare OpSpec::kPdl = true.
template <class Spec, class = void>
struct supports_pdl : std::false_type {};
template <class Spec>
struct supports_pdl<Spec, std::void_t<decltype(Spec::kPdl)>> : std::bool_constant<Spec::kPdl> {};

// griddepcontrol exists from sm_90 on; below it no launch carries the programmatic-dependent-launch attribute
// (the kernels' waits compile to nothing there).
inline bool has_griddepcontrol(const internal::DeviceFacts& dev) { return dev.arch.major >= 9; }

// The stream for a call's second kernel (the split-KV combine), which reads only what the call's first kernel
// wrote: launched programmatically dependent on sm_90+ whatever Op::set_pdl says, since its pdl_wait() orders it
// after that kernel, and the first kernel releases it once its loads are done; its launch then overlaps the first
// kernel's tail instead of following it.
inline LaunchStream within_call(const LaunchStream& s, const internal::DeviceFacts& dev) {
  return {s.stream, has_griddepcontrol(dev)};
}

// Families whose problem-only kernels live in a shared module declare OpSpec::kSharedModule = true.
template <class Spec, class = void>
struct has_shared_module : std::false_type {};
template <class Spec>
struct has_shared_module<Spec, std::void_t<decltype(Spec::kSharedModule)>> : std::bool_constant<Spec::kSharedModule> {};

// Families with a bounds-checked kernel variant have Problem::checked.
template <class P, class = void>
struct has_checked_variant : std::false_type {};
template <class P>
struct has_checked_variant<P, std::void_t<decltype(P::checked)>> : std::true_type {};

template <class Spec>
typename Spec::Config parse_config(const char* key) {
  return launch_support::parse_forced_config<typename Spec::Config>(Spec::kFamily, key, Spec::kConfigGrammar);
}

}  // namespace pipeline

namespace detail {

template <class Family>
struct OpState {
  using Spec = pipeline::OpSpec<Family>;
  using Config = typename Spec::Config;
  using Problem = typename Family::Problem;
  using Args = typename Family::Args;
  using Resolved = pipeline::Resolved<Config>;
  struct Entry {
    Resolved resolved;
    std::string forced_config;  // the forced key this entry was resolved for ("" = none)
  };

  Runtime* rt = nullptr;
  Problem problem;       // as launched: checked when the problem or the runtime asks for it
  Problem plan_problem;  // checked = false: the checked variant shares tuned configs and plans
  bool checked = false;       // the launches use the checked variant and pass the runtime's fault record
  std::atomic<bool> pdl{false};  // Op::set_pdl: launches carry the programmatic-dependent-launch attribute
  std::string problem_key;    // of plan_problem
  std::string kernel_prefix;  // "<family>/<problem key>[.chk]/": the runtime's fast key is this + config key

  std::mutex mutex;
  uint64_t generation = 0;  // internal::tuning_generation when `plans` was filled
  std::unordered_map<pipeline::PlanKey, std::shared_ptr<const Entry>, pipeline::PlanKeyHash> plans;
  // Op::shared_module per context: the split launches and the helpers find it by one lookup instead of
  // rebuilding the device facts and the fast key string and searching the runtime's module table. It depends
  // on the problem only, so it outlives tuning generations.
  std::unordered_map<void*, const LoadedKernel*> shared_modules;

  OpState(Runtime& runtime, const Problem& p) : rt(&runtime), problem(p), plan_problem(p) {
    if constexpr (pipeline::has_checked_variant<Problem>::value) {
      plan_problem.checked = false;
      problem.checked = checked = p.checked || runtime.options().checked;
    }
    Spec::validate_problem(plan_problem);
    problem_key = plan_problem.key();
    // ".chk" is always the key's last flag, so the checked key is the plain one with it appended.
    kernel_prefix = std::string(Spec::kFamily) + "/" + problem_key + (checked ? ".chk/" : "/");
  }

  // The plan of (ctx, shape, forced config, forced splits), resolved once and then found by one hash lookup.
  // With `load`, the entry also holds the module loaded on ctx (compiled or read from the cache on first use).
  std::shared_ptr<const Entry> plan(void* ctx, const pipeline::Shape& s, const char* forced, int forced_splits,
                                    bool load) {
    const pipeline::PlanKey key{ctx, s.a, s.b, pipeline::text_hash(forced), forced_splits};
    const uint64_t gen = internal::tuning_generation(*rt);
    {
      std::lock_guard<std::mutex> lock(mutex);
      sync_generation(gen);
      auto it = plans.find(key);
      if (it != plans.end() && (!load || it->second->resolved.kernel) &&
          (!forced || it->second->forced_config == forced))
        return it->second;
    }
    auto entry = std::make_shared<Entry>();
    entry->forced_config = forced ? forced : "";
    entry->resolved = resolve(ctx, s, forced, forced_splits);
    if (load) {
      Resolved& r = entry->resolved;
      std::future<void> shared_binary = start_shared_binary(ctx, r.dev->arch);
      r.kernel = &rt->get(kernel_prefix + r.config_key, [&] { return generate(problem, r.config, r.dev->arch); });
      // Loaded with the config's module, split or not: after one call of any shape, neither a split launch nor
      // a helper loads a module (which a graph capture must not do).
      if constexpr (pipeline::has_shared_module<Spec>::value) {
        if (shared_binary.valid()) shared_binary.get();  // rethrows the shared module's own error, if any
        r.shared = &shared_module(ctx);
      }
    }
    std::lock_guard<std::mutex> lock(mutex);
    if (gen == generation) plans[key] = entry;
    return entry;
  }

  // On a context's first load, the binary of the problem's shared module is found (or compiled) on a thread of
  // its own (launch_support::start_binary) while the caller does the config's, so a cold first call waits for the
  // slower compile instead of both in turn. No future (the caller does it in turn) when the module is already
  // loaded here, the family has none, or no thread can be started.
  std::future<void> start_shared_binary(void* ctx, const Arch& arch) {
    if constexpr (pipeline::has_shared_module<Spec>::value) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        if (shared_modules.count(ctx)) return {};
      }
      return launch_support::start_binary(*rt, [this, arch] { return generate_shared(problem, arch); }, arch);
    } else {
      (void)ctx;
      (void)arch;
      return {};
    }
  }

  // The problem's shared module on ctx (Op::shared_module), loaded once per context and then one lookup.
  const LoadedKernel& shared_module(void* ctx) {
    if constexpr (pipeline::has_shared_module<Spec>::value) {
      {
        std::lock_guard<std::mutex> lock(mutex);
        auto it = shared_modules.find(ctx);
        if (it != shared_modules.end()) return *it->second;
      }
      const Arch& arch = internal::device_facts(ctx, Spec::kFamily).arch;
      const LoadedKernel& k = rt->get(kernel_prefix + kSharedConfig, [&] { return generate_shared(problem, arch); });
      std::lock_guard<std::mutex> lock(mutex);
      shared_modules[ctx] = &k;
      return k;
    } else {
      (void)ctx;
      throw Error(Status::unsupported, Spec::kFamily, "shared_module: this family has no shared module");
    }
  }

  // The plans are filled under one tuning generation and cleared when it moves on (under `mutex`). Generations
  // only grow: a caller that read an older one before another moved the memo on finds the newer entries, and its
  // own result is not stored (gen != generation), instead of clearing them.
  void sync_generation(uint64_t gen) {
    if (gen <= generation) return;
    plans.clear();
    generation = gen;
  }

  // Config (forced, tuned or default), split count and workspace for one shape. A null ctx plans without a
  // device: only when the config (and, for split families, the split count) is forced.
  Resolved resolve(void* ctx, const pipeline::Shape& s, const char* forced, int forced_splits) const {
    Resolved r;
    r.tuning_key = tuning_key(problem_key, Spec::tuning_dims(plan_problem, s));
    if (forced) {
      r.config = pipeline::parse_config<Spec>(forced);
      r.config_key = r.config.key();
      r.source = "forced";
    }
    if (!ctx) {
      r.splits = forced_splits > 0 ? forced_splits : 1;
      r.workspace_bytes = Spec::workspace_bytes(plan_problem, r.config, s, r.splits);
      return r;
    }
    r.dev = &internal::device_facts(ctx, Spec::kFamily);
    const internal::DeviceFacts& dev = *r.dev;
    if (!forced) {
      r.config = launch_support::tuned_or_default<Config>(
          Spec::kFamily, r.tuning_key, rt->tuned_config(Spec::kFamily, r.tuning_key),
          [&](const Config& c) { return can_implement(plan_problem, c, dev.arch, dev.limits); },
          [&] { return Spec::default_config(plan_problem, dev.arch, s); }, &r.source);
      r.config_key = r.config.key();
    }
    const std::string why = can_implement(plan_problem, r.config, dev.arch, dev.limits);
    if (!why.empty())
      Spec::bad("config", fmt::format("a config that can run {} on {}", problem_key, dev.arch.str()),
                          fmt::format("'{}' ({})", r.config_key, why));
    r.splits = forced_splits > 0 ? forced_splits : Spec::planned_splits(plan_problem, r.config, s, dev.limits);
    r.workspace_bytes = Spec::workspace_bytes(plan_problem, r.config, s, r.splits);
    return r;
  }
};

template <class Family>
OpState<Family>& op_state(const std::shared_ptr<OpState<Family>>& s) {
  if (!s)
    throw Error(Status::invalid_argument, pipeline::OpSpec<Family>::kFamily,
                "op: expected a prepared op (from prepare()), got an empty one");
  return *s;
}

}  // namespace detail

template <class Family>
Op<Family> Op<Family>::prepare(Runtime& rt, const Problem& problem) {
  Op op;
  op.state_ = std::make_shared<detail::OpState<Family>>(rt, problem);
  return op;
}

template <class Family>
void Op<Family>::run(const Args& a, void* stream) const {
  using Spec = pipeline::OpSpec<Family>;
  detail::OpState<Family>& st = detail::op_state(state_);
  if (host_device_current()) return Spec::run_host(*st.rt, st.problem, a);  // use_device(kHostDevice)
  Spec::validate_args(st.plan_problem, a);  // host only: throws before any driver call
  pipeline::check_forced_splits<Spec>(a);
  const int splits = pipeline::forced_splits<Spec>(a);
  if (a.config) {  // a forced config (tuner, benches) is checked in full before the driver too
    if (Spec::kMaxForcedSplits == 0 || splits > 0)
      pipeline::check_workspace<Spec>(a, st.resolve(nullptr, Spec::shape(st.plan_problem, a), a.config, splits));
    else
      pipeline::parse_config<Spec>(a.config);
  }
  if (Spec::empty(a)) return;
  void* ctx = internal::require_context(Spec::kFamily);
  const auto entry = st.plan(ctx, Spec::shape(st.plan_problem, a), a.config, splits, true);
  const auto& r = entry->resolved;
  pipeline::check_workspace<Spec>(a, r);
  void* report = st.checked ? st.rt->device_report() : nullptr;
  const bool pdl = st.pdl.load(std::memory_order_relaxed) && pipeline::has_griddepcontrol(*r.dev);
  Spec::launch(*r.kernel, st.problem, r, a, LaunchStream{stream, pdl}, report);
}

template <class Family>
void Op<Family>::set_pdl(bool enable) const {
  using Spec = pipeline::OpSpec<Family>;
  detail::OpState<Family>& st = detail::op_state(state_);
  if (enable && !pipeline::supports_pdl<Spec>::value)
    throw Error(Status::unsupported, Spec::kFamily,
                "pdl: this family's kernels do not wait for the kernel before them (no programmatic dependent "
                "launch); leave it off");
  st.pdl.store(enable, std::memory_order_relaxed);
}

template <class Family>
typename Op<Family>::Plan Op<Family>::plan(const Args& a) const {
  using Spec = pipeline::OpSpec<Family>;
  detail::OpState<Family>& st = detail::op_state(state_);
  Spec::validate_shape(st.plan_problem, a);
  pipeline::check_forced_splits<Spec>(a);
  const int splits = pipeline::forced_splits<Spec>(a);
  const bool device_free = a.config && (Spec::kMaxForcedSplits == 0 || splits > 0);
  void* ctx = device_free ? nullptr : internal::require_context(Spec::kFamily);
  const pipeline::Shape s = Spec::shape(st.plan_problem, a);
  if (device_free) return pipeline::plan_of(st.resolve(nullptr, s, a.config, splits));
  return pipeline::plan_of(st.plan(ctx, s, a.config, splits, false)->resolved);
}

template <class Family>
const LoadedKernel& Op<Family>::shared_module() const {
  detail::OpState<Family>& st = detail::op_state(state_);
  return st.shared_module(internal::require_context(pipeline::OpSpec<Family>::kFamily));
}

template <class Family>
const typename Op<Family>::Problem& Op<Family>::problem() const {
  return detail::op_state(state_).problem;
}

template <class Family>
const std::string& Op<Family>::problem_key() const {
  return detail::op_state(state_).problem_key;
}

namespace pipeline {

// The op a family's one-shot call runs through: one per (runtime, problem key), kept by the runtime.
template <class Family>
Op<Family> cached_op(Runtime& rt, const typename Family::Problem& problem) {
  struct Ops {
    std::mutex mutex;
    std::unordered_map<std::string, Op<Family>> by_key;
  };
  auto ops = std::static_pointer_cast<Ops>(internal::runtime_slot(
      rt, std::string("ops/") + OpSpec<Family>::kFamily, [] { return std::static_pointer_cast<void>(std::make_shared<Ops>()); }));
  const std::string key = problem.key();
  std::lock_guard<std::mutex> lock(ops->mutex);
  auto it = ops->by_key.find(key);
  if (it != ops->by_key.end()) return it->second;
  return ops->by_key.emplace(key, Op<Family>::prepare(rt, problem)).first->second;
}

}  // namespace pipeline
}  // namespace ktune
