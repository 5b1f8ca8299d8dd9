#include "autotune/preset_schema.hpp"

#include <climits>

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::autotune::detail {

using cache::Json;

namespace {

constexpr FieldKind kInt = FieldKind::positive_int;
constexpr FieldKind kBool = FieldKind::boolean;
constexpr FieldKind kChoice = FieldKind::choice;

std::string describe(const FieldRule& r) {
  switch (r.kind) {
    case FieldKind::positive_int: return "a positive integer";
    case FieldKind::boolean: return "true or false";
    case FieldKind::choice: break;
  }
  std::string s = "one of ";
  for (size_t i = 0; i < r.choices.size(); ++i) s += fmt::format("{}\"{}\"", i ? ", " : "", r.choices[i]);
  return s;
}

bool matches(const FieldRule& r, const Json& v) {
  switch (r.kind) {
    case FieldKind::positive_int: return v.is_int() && v.as_int() > 0 && v.as_int() <= INT_MAX;
    case FieldKind::boolean: return v.is_bool();
    case FieldKind::choice:
      if (!v.is_string()) return false;
      for (const char* c : r.choices)
        if (v.as_string() == c) return true;
      return false;
  }
  return false;
}

int get(const Json& problem, const char* key) { return static_cast<int>(problem.at(key).as_int()); }

// The sharded size of `key` (divisible by tp) written back into problem.
void divide(Json& problem, const char* key, int tp, const std::string& path, const PresetIssue& issue) {
  int v = get(problem, key);
  if (v % tp != 0) issue.expected(path + "." + key, fmt::format("a multiple of tp ({})", tp), problem.at(key));
  problem.set(key, v / tp);
}

}  // namespace

const std::vector<FamilySchema>& family_schemas() {
  static const std::vector<FamilySchema> all = {
      {"xqa_decode",
       {{"head_dim", kInt, true, {}},
        {"num_q_heads", kInt, true, {}},
        {"num_kv_heads", kInt, true, {}},
        {"page_size", kInt, false, {}},
        {"layout", kChoice, false, {"hnd", "nhd"}},
        {"q_dtype", kChoice, false, {"bf16", "fp16", "fp8"}},
        {"kv_dtype", kChoice, false, {"bf16", "fp16", "fp8"}},
        {"out_dtype", kChoice, false, {"bf16", "fp16", "fp8"}},
        {"max_q_len", kInt, false, {}},
        {"mask", kChoice, false, {"none", "causal", "explicit"}},
        {"sinks", kBool, false, {}},
        {"sliding_window", kBool, false, {}},
        {"softcap", kBool, false, {}},
        {"lse", kBool, false, {}},
        {"checked", kBool, false, {}}},
       {"batch", "seq_len"},
       false},
      {"sparse_mla_decode",
       {{"num_heads", kInt, true, {}},
        {"kv_lora_rank", kInt, true, {}},
        {"rope_dim", kInt, true, {}},
        {"topk", kInt, true, {}},
        {"page_size", kInt, false, {}},
        {"q_dtype", kChoice, false, {"bf16"}},
        {"kv_dtype", kChoice, false, {"bf16", "fp8_ds_mla"}},
        {"max_q_len", kInt, false, {}},
        {"checked", kBool, false, {}}},
       {"batch"},  // work is bounded by topk, not by the KV length
       false},
      {"mxfp4_gemm",
       {{"n", kInt, true, {}},
        {"k", kInt, true, {}},
        {"num_experts", kInt, false, {}},
        {"top_k", kInt, false, {}},
        {"a_dtype", kChoice, false, {"bf16", "fp16"}},
        {"out_dtype", kChoice, false, {"bf16", "fp16"}}},
       {"tokens"},
       true},
  };
  return all;
}

const FamilySchema* find_schema(const std::string& family) {
  for (const auto& s : family_schemas())
    if (family == s.family) return &s;
  return nullptr;
}

std::string known_families() {
  std::string s;
  for (const auto& f : family_schemas()) s += fmt::format("{}\"{}\"", s.empty() ? "" : ", ", f.family);
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

Json canonical_problem(const FamilySchema& schema, const Json& problem, const std::string& path,
                       const PresetIssue& issue) {
  if (!problem.is_object()) issue.expected(path, "an object of problem fields", problem);
  std::vector<const char*> names;
  for (const auto& r : schema.fields) names.push_back(r.name);
  issue.only_known(problem, path, names);
  Json out = Json::object();
  for (const auto& r : schema.fields) {
    const Json* v = problem.find(r.name);
    std::string field = path + "." + r.name;
    if (!v) {
      if (r.required) issue.missing(field, describe(r));
      continue;
    }
    if (!matches(r, *v)) issue.expected(field, describe(r), *v);
    out.set(r.name, *v);
  }
  // Cross-field rules every kernel of the family shares; kernel-specific limits stay with the family.
  std::string family = schema.family;
  if (family == "xqa_decode" && get(out, "num_q_heads") % get(out, "num_kv_heads") != 0)
    issue.expected(path + ".num_q_heads", fmt::format("a multiple of num_kv_heads ({})", get(out, "num_kv_heads")),
                   out.at("num_q_heads"));
  if (family == "mxfp4_gemm" && out.contains("top_k") &&
      get(out, "top_k") > (out.contains("num_experts") ? get(out, "num_experts") : 1))
    issue.expected(path + ".top_k", "at most num_experts", out.at("top_k"));
  return out;
}

void shard_problem(const std::string& family, Json& problem, int tp, const std::string& tp_split,
                   const std::string& path, const PresetIssue& issue) {
  if (tp == 1) return;
  if (family == "xqa_decode") {
    divide(problem, "num_q_heads", tp, path, issue);
    // KV heads split while there are enough; past that each GPU keeps one (replicated) KV head.
    int kv = get(problem, "num_kv_heads");
    if (kv % tp == 0) problem.set("num_kv_heads", kv / tp);
    else if (tp % kv == 0) problem.set("num_kv_heads", 1);
    else issue.expected(path + ".num_kv_heads", fmt::format("a divisor or a multiple of tp ({})", tp), problem.at("num_kv_heads"));
  } else if (family == "sparse_mla_decode") {
    divide(problem, "num_heads", tp, path, issue);  // one latent KV head, replicated
  } else if (family == "mxfp4_gemm") {
    if (tp_split == "n") divide(problem, "n", tp, path, issue);
    if (tp_split == "k") divide(problem, "k", tp, path, issue);
  }
}

void apply_spec_tokens(const std::string& family, Json& problem, int spec_tokens) {
  if (family != "xqa_decode" && family != "sparse_mla_decode") return;
  problem.set("max_q_len", spec_tokens + 1);
  if (family != "xqa_decode") return;
  const Json* mask = problem.find("mask");
  bool explicit_mask = mask && mask->is_string() && mask->as_string() == "explicit";
  if (spec_tokens == 0) problem.set("mask", "none");
  else if (!explicit_mask) problem.set("mask", "causal");
}

}  // namespace ktune::autotune::detail
