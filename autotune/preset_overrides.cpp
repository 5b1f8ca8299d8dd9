// with_overrides: the command-line knobs of `ktune warmup` applied to a loaded preset.
#include <fmt/format.h>

#include "autotune/preset_schema.hpp"
#include "autotune/presets.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"

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
    const detail::FamilySchema* schema = detail::find_schema(op.family);
    if (!schema) continue;  // parse_preset only produces known families
    Json problem = Json::parse(op.problem_json);
    if (!edit(op, problem)) continue;
    op.problem_json = detail::canonical_problem(*schema, problem, fmt::format("ops[{}].problem", i), issue).dump();
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

Preset with_overrides(Preset p, std::optional<std::string> kv_dtype, std::optional<int> max_batch,
                      std::optional<int> max_seq_len, std::optional<int> spec_tokens) {
  if (kv_dtype) {
    if (*kv_dtype != "bf16" && *kv_dtype != "fp16" && *kv_dtype != "fp8")
      bad("kv_dtype", "one of \"bf16\", \"fp16\", \"fp8\"", fmt::format("\"{}\"", *kv_dtype));
    edit_problems(p, [&](const PresetOp& op, Json& problem) {
      if (op.family != "xqa_decode") return false;
      problem.set("kv_dtype", *kv_dtype);
      return true;
    });
  }
  if (max_batch) shrink_max(p.batch, *max_batch, "max_batch");
  if (max_seq_len) shrink_max(p.seq_len, *max_seq_len, "max_seq_len");
  if (spec_tokens) {
    if (*spec_tokens < 0 || *spec_tokens > detail::kMaxSpecTokens)
      bad("spec_tokens", fmt::format("an integer in 0..{}", detail::kMaxSpecTokens), std::to_string(*spec_tokens));
    p.spec_tokens = *spec_tokens;
    edit_problems(p, [&](const PresetOp& op, Json& problem) {
      detail::apply_spec_tokens(op.family, problem, *spec_tokens);
      return true;
    });
  }
  return p;
}

}  // namespace ktune::autotune
