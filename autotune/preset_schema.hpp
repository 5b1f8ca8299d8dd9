// Internal to the presets: the problem fields each family takes in a preset, and the error convention.
// Keep in step with docs/presets.md and with each family's problem_from_json.
#pragma once

#include <string>
#include <vector>

#include "ktune/cache/json.hpp"

namespace ktune::autotune::detail {

// Draft tokens per request beyond this make no sense for decode and would overflow token counts.
constexpr int kMaxSpecTokens = 255;

enum class FieldKind { positive_int, boolean, choice };

struct FieldRule {
  const char* name;
  FieldKind kind;
  bool required;
  std::vector<const char*> choices;  // FieldKind::choice only
};

struct FamilySchema {
  const char* family;
  std::vector<FieldRule> fields;  // canonical member order
  std::vector<const char*> dims;  // bucketed dynamic dimensions: "batch", "seq_len", "tokens"
  bool takes_tp_split;            // the op may say how tensor parallelism splits it
};

const std::vector<FamilySchema>& family_schemas();
const FamilySchema* find_schema(const std::string& family);  // nullptr if unknown
std::string known_families();                                // "xqa_decode, sparse_mla_decode, mxfp4_gemm"

// Every error of one preset: "<origin>: <path>: <what>" as Error(invalid_argument, "presets").
class PresetIssue {
 public:
  explicit PresetIssue(std::string origin) : origin_(std::move(origin)) {}
  [[noreturn]] void fail(const std::string& path, const std::string& what) const;
  // "<path>: expected <expected>, got <value as JSON>"
  [[noreturn]] void expected(const std::string& path, const std::string& expected, const cache::Json& got) const;
  [[noreturn]] void missing(const std::string& path, const std::string& expected) const;
  // Throws for any member of obj not in `known`.
  void only_known(const cache::Json& obj, const std::string& path, const std::vector<const char*>& known) const;

 private:
  std::string origin_;
};

// Validates a problem object against the family's rules and returns it with members in canonical order.
cache::Json canonical_problem(const FamilySchema& schema, const cache::Json& problem, const std::string& path,
                              const PresetIssue& issue);

// Divides the problem's parallel dimension by tp (heads for attention, n or k for a GEMM per tp_split).
void shard_problem(const std::string& family, cache::Json& problem, int tp, const std::string& tp_split,
                   const std::string& path, const PresetIssue& issue);

// spec_tokens applied to one op's problem (see with_overrides).
void apply_spec_tokens(const std::string& family, cache::Json& problem, int spec_tokens);

}  // namespace ktune::autotune::detail
