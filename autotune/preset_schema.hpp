// Internal to the presets: the error convention, and an op's problem through its family's one schema and
// rules (FamilyInfo: problem_fields, check_problem_fields, shard_problem, apply_spec_tokens).
#pragma once

#include <string>
#include <vector>

#include "ktune/cache/json.hpp"
#include "ktune/family.hpp"

namespace ktune::autotune::detail {

// The registered family of that name, or nullptr.
const FamilyInfo* find_family(const std::string& name);
std::string known_families();  // "\"xqa_decode\", \"sparse_mla_decode\", \"mxfp4_gemm\""

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
  // A family's ProblemFieldError as an error of this preset at `path` (the problem object's path).
  [[noreturn]] void problem(const std::string& path, const ProblemFieldError& e) const;

 private:
  std::string origin_;
};

// The problem checked against the family's schema and rules, members in canonical order.
cache::Json canonical_problem(const FamilyInfo& family, const cache::Json& problem, const std::string& path,
                              const PresetIssue& issue);

// The problem on each of tp GPUs (FamilyInfo::shard_problem; unchanged for tp 1 or a family without a rule).
void shard_problem(const FamilyInfo& family, cache::Json& problem, int tp, const std::string& tp_split,
                   const std::string& path, const PresetIssue& issue);

// spec_tokens applied to one op's problem (FamilyInfo::apply_spec_tokens; see with_overrides).
void apply_spec_tokens(const FamilyInfo& family, cache::Json& problem, int spec_tokens);

}  // namespace ktune::autotune::detail
