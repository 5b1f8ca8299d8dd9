// with_overrides: the command-line knobs of `ktune warmup` applied to a loaded preset.
#include <algorithm>

#include <fmt/format.h>

#include "autotune/preset_schema.hpp"
#include "autotune/presets.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"

namespace ktune::autotune {

using cache::Json;

namespace {

[[noreturn]] void bad(const char* option, const std::string& expected, const std::string& got) {
  throw Error(Status::invalid_argument, "presets", fmt::format("{}: expected {}, got {}", option, expected, got));
}

// Rewrites every op's problem through `edit`, keeping members in canonical order.
template <class Edit>
void edit_problems(Preset& p, Edit&& edit) {
  detail::PresetIssue issue(p.origin);
  for (size_t i = 0; i < p.ops.size(); ++i) {
    PresetOp& op = p.ops[i];
    const FamilyInfo* family = detail::find_family(op.family);
    if (!family) continue;  // parse_preset only produces known families
    Json problem = Json::parse(op.problem_json);
    if (!edit(*family, problem)) continue;
    op.problem_json = detail::canonical_problem(*family, problem, fmt::format("ops[{}].problem", i), issue).dump();
  }
}

void shrink_max(BucketSpec& spec, int max, const char* option) {
  if (max < 1 || max > kMaxBucketValue)
    bad(option, fmt::format("an integer in 1..{} (buckets are rounded up to a power of two that fits in int)",
                            kMaxBucketValue),
        std::to_string(max));
  spec.max = max;
  if (spec.min > max) spec.min = max;
}

}  // namespace

std::vector<std::string> override_kv_dtypes() {
  std::vector<std::string> all;
  for (const auto& f : families())
    for (const auto& d : f.engine_kv_dtypes)
      if (std::find(all.begin(), all.end(), d) == all.end()) all.push_back(d);
  return all;
}

Preset with_overrides(Preset p, std::optional<std::string> kv_dtype, std::optional<int> max_batch,
                      std::optional<int> max_seq_len, std::optional<int> spec_tokens) {
  if (kv_dtype) {
    const std::vector<std::string> all = override_kv_dtypes();
    if (std::find(all.begin(), all.end(), *kv_dtype) == all.end()) {
      std::string list;
      for (const auto& d : all) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", d);
      bad("kv_dtype", "one of " + list, fmt::format("\"{}\"", *kv_dtype));
    }
    edit_problems(p, [&](const FamilyInfo& family, Json& problem) {
      const auto& own = family.engine_kv_dtypes;
      if (std::find(own.begin(), own.end(), *kv_dtype) == own.end()) return false;
      problem.set("kv_dtype", *kv_dtype);
      return true;
    });
  }
  if (max_batch) shrink_max(p.batch, *max_batch, "max_batch");
  if (max_seq_len) shrink_max(p.seq_len, *max_seq_len, "max_seq_len");
  if (spec_tokens) {
    if (*spec_tokens < 0 || *spec_tokens > kMaxSpecTokens)
      bad("spec_tokens", fmt::format("an integer in 0..{}", kMaxSpecTokens), std::to_string(*spec_tokens));
    p.spec_tokens = *spec_tokens;
    edit_problems(p, [&](const FamilyInfo& family, Json& problem) {
      detail::apply_spec_tokens(family, problem, *spec_tokens);
      return true;
    });
  }
  return p;
}

}  // namespace ktune::autotune
