#include "autotune/preset_schema.hpp"

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::autotune::detail {

using cache::Json;

const FamilyInfo* find_family(const std::string& name) {
  for (const auto& f : families())
    if (f.name == name) return &f;
  return nullptr;
}

std::string known_families() {
  std::string s;
  for (const auto& f : families()) s += fmt::format("{}\"{}\"", s.empty() ? "" : ", ", f.name);
  return s;
}

void PresetIssue::fail(const std::string& path, const std::string& what) const {
  throw Error(Status::invalid_argument, "presets", fmt::format("{}: {}: {}", origin_, path, what));
}

void PresetIssue::expected(const std::string& path, const std::string& expected, const Json& got) const {
  std::string shown = got.dump();
  if (shown.size() > 60) shown = shown.substr(0, 57) + "...";
  fail(path, fmt::format("expected {}, got {}", expected, shown));
}

void PresetIssue::missing(const std::string& path, const std::string& expected) const {
  fail(path, fmt::format("required field missing (expected {})", expected));
}

void PresetIssue::only_known(const Json& obj, const std::string& path, const std::vector<const char*>& known) const {
  for (const auto& [key, value] : obj.members()) {
    bool ok = false;
    for (const char* k : known) ok = ok || key == k;
    if (ok) continue;
    std::string list;
    for (const char* k : known) list += fmt::format("{}{}", list.empty() ? "" : ", ", k);
    fail(path.empty() ? key : path + "." + key, fmt::format("unknown field (expected one of {})", list));
  }
}

void PresetIssue::problem(const std::string& path, const ProblemFieldError& e) const {
  fail(e.field().empty() ? path : path + "." + e.field(), e.detail());
}

Json canonical_problem(const FamilyInfo& family, const Json& problem, const std::string& path, const PresetIssue& issue) {
  try {
    return Json::parse(canonical_problem_json(family, problem.dump()));
  } catch (const ProblemFieldError& e) {
    issue.problem(path, e);
  }
}

void shard_problem(const FamilyInfo& family, Json& problem, int tp, const std::string& tp_split,
                   const std::string& path, const PresetIssue& issue) {
  if (tp == 1 || !family.shard_problem) return;
  try {
    problem = Json::parse(family.shard_problem(problem.dump(), tp, tp_split));
  } catch (const ProblemFieldError& e) {
    issue.problem(path, e);
  }
}

void apply_spec_tokens(const FamilyInfo& family, Json& problem, int spec_tokens) {
  if (family.apply_spec_tokens) problem = Json::parse(family.apply_spec_tokens(problem.dump(), spec_tokens));
}

}  // namespace ktune::autotune::detail
