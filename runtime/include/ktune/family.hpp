// The kernel families this build knows. A family is one plugin: its FamilyInfo says everything the rest of
// the system asks of it -- the CLI, the C API, Python's key building, the presets, the tuner, warmup and
// replay -- and nothing outside the family's folder dispatches on its name (docs/new_family.md).
// Problems and configs travel as their readable keys ("d128.h32.kv8.p32..."), so a cache listing, a log line
// and a command line all speak the same language.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/error.hpp"
#include "ktune/export.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune {

class Runtime;
namespace autotune {
class Workload;  // autotune/workload.hpp
}

// A family's prepared op behind the C API and the bindings (ktune_op_prepare / ktune_op_run): it runs from the
// family's C argument struct (ktune.h), whose struct_size and family_id the caller has already checked.
class KTUNE_API COp {
 public:
  virtual ~COp() = default;
  virtual void run(const void* c_args, void* stream) const = 0;
  virtual std::string plan_json(const void* c_args) const = 0;  // what run(c_args) would launch
  virtual void set_pdl(bool enable) const = 0;                    // Op::set_pdl
};

// FNV-1a of the family name: the family_id that begins every C argument struct (ktune_family_id).
constexpr uint32_t c_family_id(const char* name) {
  uint32_t h = 2166136261u;
  for (; name && *name; ++name) h = (h ^ static_cast<unsigned char>(*name)) * 16777619u;
  return name ? h : 0;
}

// One member of a family's problem as JSON. FamilyInfo::problem_fields is the family's one schema: presets,
// ktune_problem_key / ktune_op_prepare, `ktune compile --config` and Python's problem dicts are all checked
// against it (docs/<family>.md lists the members).
struct KTUNE_API ProblemField {
  enum class Kind { positive_int, boolean, choice };
  std::string name;
  Kind kind = Kind::positive_int;
  bool required = false;
  std::vector<std::string> choices;  // Kind::choice: the accepted strings
};

// A problem JSON member that breaks its family's schema or one of its rules: Error(invalid_argument, family,
// "problem JSON: <field>: <detail>"), with field and detail kept apart so a preset names the member by its own
// path ("ops[2].problem.num_q_heads: expected a multiple of num_kv_heads (8), got 30").
class KTUNE_API ProblemFieldError : public Error {
 public:
  ProblemFieldError(const std::string& family, std::string field, std::string detail)
      : Error(Status::invalid_argument, family,
              "problem JSON: " + (field.empty() ? std::string() : field + ": ") + detail),
        field_(std::move(field)),
        detail_(std::move(detail)) {}
  const std::string& field() const { return field_; }    // "head_dim"; "" for the document itself
  const std::string& detail() const { return detail_; }  // "expected a positive integer, got \"abc\""

 private:
  std::string field_, detail_;
};

// The buckets of one tuning key by short dim name: b = batch, l = max seq len, m = GEMM rows (tokens).
using TuningBuckets = std::vector<std::pair<std::string, int64_t>>;
// The tuner's inputs for one (canonical problem key, buckets) on the current device (autotune/workload.hpp).
// A plain function (the family's workload*.cpp defines it), so the runtime core never needs the Workload type.
using WorkloadFactory = std::unique_ptr<autotune::Workload> (*)(Runtime&, const std::string& problem_key,
                                                                const TuningBuckets& buckets);

struct KTUNE_API FamilyInfo {
  // ---- Identity (the CLI lists these) ----
  std::string name;         // "xqa_decode": [a-z0-9_]
  std::string description;  // one line
  // A few representative problems (what `ktune compile --family F` builds when given no problem).
  std::function<std::vector<std::string>()> example_problems;

  // ---- The problem ----
  std::vector<ProblemField> problem_fields;  // the JSON schema, members in canonical order
  // Rules across members that every kernel of the family shares (num_q_heads a multiple of num_kv_heads), run on
  // an object that passed the member checks (compact JSON). Throws ProblemFieldError. Optional.
  std::function<void(const std::string& problem_json)> check_problem_fields;
  // Builds a problem key from a JSON object of problem fields: canonical_problem_json (below), the family's
  // defaults, its full validation. Throws Error(invalid_argument) naming the field.
  std::function<std::string(const std::string& problem_json)> problem_from_json;
  // Parses and validates a problem key, returning its canonical form. Throws Error(invalid_argument).
  std::function<std::string(const std::string& problem_key)> canonical_problem;

  // ---- Kernels ----
  std::function<std::string(const std::string& problem_key, const Arch&)> default_config;
  // Every candidate config that can_implement accepts for this problem on `limits`.
  std::function<std::vector<std::string>(const std::string& problem_key, const Arch&, const DeviceLimits&)>
      search_space;
  std::function<GeneratedKernel(const std::string& problem_key, const std::string& config_key, const Arch&)>
      generate;
  // Whether the problem's kernels that no tile config changes (a split-KV combine, engine helpers) live in a
  // module of their own on `arch`: generate(problem, kSharedConfig, arch) builds it, once per problem, and the
  // config modules hold only the config's own kernels, so a sweep of N configs compiles those kernels once
  // instead of N times. Null, or false for an arch: every config module holds all of its kernels.
  std::function<bool(const std::string& problem_key, const Arch&)> has_shared_module;

  // ---- Engines: the C op ----
  // The C op of a canonical problem key, and the size of the C argument struct it runs from (sizeof the
  // ktune.h struct). Empty for a family without a C API.
  std::function<std::unique_ptr<COp>(Runtime&, const std::string& problem_key)> prepare_c_op;
  uint32_t c_args_size = 0;
  // The sizes of the struct's older, shorter forms that callers may still pass (ktune.h: a struct grows at its
  // end and a new field means "as before" when zero; such a struct is read with its missing tail zero).
  std::vector<uint32_t> c_args_older_sizes;

  // ---- Tuning, warmup and replay (autotune/) ----
  // The bucketed dynamic dimensions of a tuning key, from the preset's ranges: "batch" (requests per step,
  // short name b), "seq_len" (KV length per request, l), "tokens" (GEMM rows per step = batch x (spec_tokens
  // + 1), m). Their order is the family's; tuning keys sort them by short name.
  std::vector<std::string> tuning_dims;
  // The tuner's GPU and host (Arch "host") inputs; null: the family is not tuned on that target.
  WorkloadFactory workload = nullptr, host_workload = nullptr;
  // The work of one call of (problem JSON, buckets by short name), in tokens its requests attend to: what
  // warmup's host cap bounds. Empty: batch x seq_len (a dim the family lacks counts 1). work_tokens_text names
  // the product in warmup's skip messages.
  std::function<int64_t(const std::string& problem_json, const TuningBuckets& buckets)> work_tokens;
  std::string work_tokens_text = "batch x seq_len";

  // ---- Model presets (autotune/presets.cpp, docs/presets.md) ----
  // The problem on each of tp GPUs (returns its JSON; throws ProblemFieldError naming a member tp does not
  // divide). tp_split is the op's, from tp_splits. Empty: the problem is the same on every GPU.
  std::function<std::string(const std::string& problem_json, int tp, const std::string& tp_split)> shard_problem;
  // The op's "tp_split" choices, e.g. {"n", "k", "none"} ("none", the default, must be one); empty: the op
  // takes no tp_split.
  std::vector<std::string> tp_splits;
  // The problem with spec_tokens draft tokens per request (e.g. max_q_len = spec_tokens + 1). Empty: the
  // family does not see draft tokens.
  std::function<std::string(const std::string& problem_json, int spec_tokens)> apply_spec_tokens;
  // The KV cache dtypes `ktune warmup --kv-dtype` may give this family's ops (their "kv_dtype" member); empty:
  // the model fixes the family's cache format.
  std::vector<std::string> engine_kv_dtypes;
};

// The config key of a family's shared module (FamilyInfo::has_shared_module). A family's tile config keys must
// never spell it (none of this build's grammars accepts it), so the module's fast key and cache row never meet a
// config's.
inline constexpr const char* kSharedConfig = "shared";

// What compiles a problem's kernels on `arch` besides its tile configs: {kSharedConfig} when the family keeps a
// shared module there, else none. Warmup, `ktune compile`, the tuner and the C API compile add these to their
// config modules so that a launch, a helper call or a replay finds every module it needs in the cache.
KTUNE_API std::vector<std::string> shared_module_configs(const FamilyInfo& family, const std::string& problem_key,
                                                         const Arch& arch);

// `problem_json` checked against family.problem_fields and family.check_problem_fields: the same object,
// compact, members in canonical order, defaults not filled in. Throws ProblemFieldError naming the member.
KTUNE_API std::string canonical_problem_json(const FamilyInfo& family, const std::string& problem_json);

// This build's families (templates/registry.cpp), then the registered ones in registration order.
KTUNE_API const std::vector<FamilyInfo>& families();
// Throws Error(not_found) listing the known families.
KTUNE_API const FamilyInfo& family(const std::string& name);
// Adds a family that is not part of this build's registry (a test binary's, an out-of-tree one). Call it
// before anything reads the registry (a static initializer, or first thing in main): references from
// families() and family() stay valid for the process, so a registration after the first read throws
// Error(internal). Throws Error(invalid_argument) for a name that is empty, not [a-z0-9_] or taken, or an
// entry missing what every family must provide (problem_fields, problem_from_json, canonical_problem,
// default_config, search_space, generate).
KTUNE_API void register_family(FamilyInfo info);

}  // namespace ktune
