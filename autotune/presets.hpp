// Model presets: the kernel problems one model needs, so `ktune warmup --preset NAME` can tune all of them.
//
// A preset is JSON (format in docs/presets.md). The embedded ones are listed by preset_names(); a custom model
// is a file in the same format. Every problem is validated on load, and every error names the origin and the
// field path: "preset qwen3-32b: ops[0].problem.head_dim: expected a positive integer, got \"abc\"".
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "autotune/buckets.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

struct PresetOp {
  std::string family;        // a registered family's name
  // The problem object as compact JSON, per GPU (FamilyInfo::shard_problem applied), members in the family's
  // schema order (FamilyInfo::problem_fields) and defaults not filled in (the family fills them).
  std::string problem_json;
  std::string label;               // unique within the preset, e.g. "attn.full"
  std::vector<std::string> arches; // tuned only for these arches ("sm_120a"); empty: every arch
  std::string tp_split;            // one of FamilyInfo::tp_splits ("none" by default); empty for a family without
};

struct Preset {
  std::string name, description;
  std::string origin;  // "preset NAME" or the file path; prefixes error messages
  std::vector<PresetOp> ops;
  BucketSpec batch{"batch", 1, 1};      // requests per decode step
  BucketSpec seq_len{"seq_len", 1, 1};  // KV length per request
  int tp = 1;                           // tensor-parallel degree the problems are sharded for
  int spec_tokens = 0;                  // draft tokens per request (max_q_len = spec_tokens + 1)
};

// Names of the embedded presets, including the listed tensor-parallel variants ("llama-3.1-70b-tp8").
KTUNE_API std::vector<std::string> preset_names();

// Preset files larger than this are refused before they are read.
constexpr size_t kMaxPresetFileBytes = size_t{16} << 20;

// An embedded preset by name, "NAME-tpN" for any embedded NAME, or a JSON file (a path: contains '/', ends in
// ".json", or names an existing file). tp, when given, overrides the preset's. Throws Error(not_found) for an
// unknown name, an unreadable file or one that is not a regular file, Error(invalid_argument) for a file above
// kMaxPresetFileBytes or invalid content.
KTUNE_API Preset load_preset(const std::string& name_or_path, std::optional<int> tp = std::nullopt);

// Parses and validates preset JSON; origin prefixes every error message. Throws Error(invalid_argument).
KTUNE_API Preset parse_preset(const std::string& json_text, const std::string& origin,
                              std::optional<int> tp = std::nullopt);

// The CLI's overrides (ktune warmup --kv-dtype/--max-batch/--max-seq-len/--spec-tokens):
//   kv_dtype     the "kv_dtype" of every op whose family lists it in FamilyInfo::engine_kv_dtypes (xqa_decode:
//                "bf16" | "fp16" | "fp8"); other families keep their cache format (sparse MLA's is the model's)
//   max_batch    the largest batch bucket (the smallest drops to it if above)
//   max_seq_len  the largest seq_len bucket (likewise)
//   spec_tokens  draft tokens K >= 0, applied by each family's FamilyInfo::apply_spec_tokens (max_q_len = K + 1
//                on xqa_decode and sparse_mla_decode ops; an xqa_decode mask becomes "causal" for K > 0 unless
//                "explicit", and "none" for K = 0)
// Throws Error(invalid_argument, "presets") naming the option.
KTUNE_API Preset with_overrides(Preset preset, std::optional<std::string> kv_dtype, std::optional<int> max_batch,
                                std::optional<int> max_seq_len, std::optional<int> spec_tokens);

// The kv_dtype values with_overrides takes: every dtype some family's ops accept (FamilyInfo::engine_kv_dtypes;
// each family takes only its own).
KTUNE_API std::vector<std::string> override_kv_dtypes();
// The largest spec_tokens a preset or an override may give: more draft tokens per request make no sense for
// decode and would overflow token counts.
inline constexpr int kMaxSpecTokens = 255;

}  // namespace ktune::autotune
