// Parsing, validating and finding presets. The embedded JSON lives in presets_data.cpp; overrides in
// preset_overrides.cpp; each op's problem goes through its family's schema and rules (preset_schema.cpp).
#include "autotune/presets.hpp"

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <set>
#include <sys/stat.h>

#include <fmt/format.h>

#include "autotune/preset_data.hpp"
#include "autotune/preset_schema.hpp"
#include "ktune/arch.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"

namespace ktune::autotune {

using cache::Json;
using detail::PresetIssue;

namespace {

bool is_slug(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
  });
}

const Json& required(const Json& obj, const std::string& path, const char* key, const char* expected,
                     const PresetIssue& issue) {
  const Json* v = obj.find(key);
  if (!v) issue.missing(path.empty() ? key : path + "." + key, expected);
  return *v;
}

std::string slug(const Json& obj, const std::string& path, const char* key, const PresetIssue& issue) {
  const char* expected = "a name of a-z, 0-9, '.', '_' and '-'";
  const Json& v = required(obj, path, key, expected, issue);
  if (!v.is_string() || !is_slug(v.as_string())) issue.expected(path.empty() ? key : path + "." + key, expected, v);
  return v.as_string();
}

int int_at_least(const Json& v, int min, const std::string& path, const PresetIssue& issue) {
  std::string expected = min == 1 ? "a positive integer" : fmt::format("an integer >= {}", min);
  if (!v.is_int() || v.as_int() < min || v.as_int() > INT_MAX) issue.expected(path, expected, v);
  return static_cast<int>(v.as_int());
}

// A bucket range end: >= min and at most kMaxBucketValue, so the power of two it rounds up to is an int.
int bucket_end(const Json& v, int min, const std::string& path, const PresetIssue& issue) {
  if (!v.is_int() || v.as_int() < min || v.as_int() > kMaxBucketValue)
    issue.expected(path, fmt::format("an integer in {}..{}", min, kMaxBucketValue), v);
  return static_cast<int>(v.as_int());
}

BucketSpec parse_bucket(const Json& buckets, const char* dim, const PresetIssue& issue) {
  std::string path = std::string("buckets.") + dim;
  const Json& b = required(buckets, "buckets", dim, "an object {\"min\": N, \"max\": N}", issue);
  if (!b.is_object()) issue.expected(path, "an object {\"min\": N, \"max\": N}", b);
  issue.only_known(b, path, {"min", "max"});
  BucketSpec spec{dim, 1, 1};
  if (const Json* min = b.find("min")) spec.min = bucket_end(*min, 1, path + ".min", issue);
  spec.max = bucket_end(required(b, path, "max", "an integer >= min", issue), spec.min, path + ".max", issue);
  return spec;
}

std::vector<std::string> parse_arches(const Json& v, const std::string& path, const PresetIssue& issue) {
  const char* expected = "a non-empty array of arch names like \"sm_90a\"";
  if (!v.is_array() || v.size() == 0) issue.expected(path, expected, v);
  std::vector<std::string> out;
  for (size_t i = 0; i < v.size(); ++i) {
    std::string item = fmt::format("{}[{}]", path, i);
    const Json& a = v.at(i);
    if (!a.is_string()) issue.expected(item, "an arch name like \"sm_90a\"", a);
    Arch arch;
    try {
      arch = Arch::parse(a.as_string());
    } catch (const Error&) {
      issue.expected(item, "an arch name like \"sm_90a\"", a);
    }
    // A name no GPU has would drop the op from every warmup and check without a word.
    if (const std::string why = unknown_target_reason(arch); !why.empty())
      issue.fail(item, why);
    const std::string norm = arch.str();
    if (std::find(out.begin(), out.end(), norm) == out.end()) out.push_back(norm);
  }
  return out;
}

PresetOp parse_op(const Json& op, size_t index, int tp, const PresetIssue& issue) {
  std::string path = fmt::format("ops[{}]", index);
  if (!op.is_object()) issue.expected(path, "an object with label, family and problem", op);
  PresetOp out;
  const Json& family = required(op, path, "family", "a family name", issue);
  const FamilyInfo* fam = family.is_string() ? detail::find_family(family.as_string()) : nullptr;
  if (!fam) issue.expected(path + ".family", "one of " + detail::known_families(), family);
  out.family = fam->name;
  const bool takes_tp_split = !fam->tp_splits.empty();
  std::vector<const char*> known = {"label", "family", "problem", "arches"};
  if (takes_tp_split) known.push_back("tp_split");
  issue.only_known(op, path, known);
  out.label = slug(op, path, "label", issue);
  if (const Json* arches = op.find("arches")) out.arches = parse_arches(*arches, path + ".arches", issue);
  if (takes_tp_split) {
    out.tp_split = "none";
    if (const Json* split = op.find("tp_split")) {
      const auto& choices = fam->tp_splits;
      if (!split->is_string() || std::find(choices.begin(), choices.end(), split->as_string()) == choices.end()) {
        std::string list;
        for (const auto& c : choices) list += fmt::format("{}\"{}\"", list.empty() ? "" : ", ", c);
        issue.expected(path + ".tp_split", "one of " + list, *split);
      }
      out.tp_split = split->as_string();
    }
  }
  std::string problem_path = path + ".problem";
  Json problem = detail::canonical_problem(
      *fam, required(op, path, "problem", "an object of problem fields", issue), problem_path, issue);
  detail::shard_problem(*fam, problem, tp, out.tp_split, problem_path, issue);
  out.problem_json = problem.dump();
  return out;
}

// A preset file is a small regular file: anything else (a device such as /dev/zero, a FIFO, a directory) or a
// file above kMaxPresetFileBytes is refused before it is read, and at most that many bytes are ever read.
std::string read_file(const std::string& path) {
  const auto cannot = [&](const std::string& why) {
    return Error(Status::not_found, "presets",
                 fmt::format("{}: cannot read the preset file ({}); pass an existing JSON file or one of the names "
                             "`ktune presets` lists", path, why));
  };
  const auto too_large = [&] {
    return Error(Status::invalid_argument, "presets",
                 fmt::format("{}: the preset file is larger than {} bytes (the cap for a preset)", path,
                             kMaxPresetFileBytes));
  };
  struct stat st{};
  if (::stat(path.c_str(), &st) != 0) throw cannot(std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw cannot("not a regular file");
  if (st.st_size > static_cast<off_t>(kMaxPresetFileBytes)) throw too_large();
  std::ifstream in(path, std::ios::binary);
  if (!in) throw cannot(std::strerror(errno));
  std::string text(kMaxPresetFileBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  if (text.size() > kMaxPresetFileBytes) throw too_large();  // it grew after the stat
  return text;
}

bool is_file(const std::string& path) {
  struct stat st{};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// "NAME-tpN" with NAME embedded and N a positive integer: the embedded entry and N.
const detail::EmbeddedPreset* split_tp_suffix(const std::string& name, int* tp) {
  size_t at = name.rfind("-tp");
  if (at == std::string::npos || at + 3 >= name.size() || name[at + 3] == '0') return nullptr;
  std::string digits = name.substr(at + 3);
  if (digits.size() > 4 || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }))
    return nullptr;
  const detail::EmbeddedPreset* base = detail::find_embedded(name.substr(0, at));
  if (base) *tp = std::stoi(digits);
  return base;
}

}  // namespace

Preset parse_preset(const std::string& json_text, const std::string& origin, std::optional<int> tp_override) {
  PresetIssue issue(origin);
  Json root;
  try {
    root = Json::parse(json_text);
  } catch (const cache::JsonError& e) {
    issue.fail("(document)", fmt::format("not valid JSON: {}", e.what()));
  }
  if (!root.is_object()) issue.expected("(document)", "a JSON object", root);
  issue.only_known(root, "", {"name", "description", "tp", "spec_tokens", "buckets", "ops"});

  Preset p;
  p.origin = origin;
  p.name = slug(root, "", "name", issue);
  if (const Json* d = root.find("description")) {
    if (!d->is_string()) issue.expected("description", "a string", *d);
    p.description = d->as_string();
  }
  if (const Json* tp = root.find("tp")) p.tp = int_at_least(*tp, 1, "tp", issue);
  if (tp_override) {
    if (*tp_override < 1) issue.expected("tp", "a positive integer", Json(*tp_override));
    p.tp = *tp_override;
  }
  if (const Json* k = root.find("spec_tokens")) {
    p.spec_tokens = int_at_least(*k, 0, "spec_tokens", issue);
    if (p.spec_tokens > kMaxSpecTokens)
      issue.expected("spec_tokens", fmt::format("an integer in 0..{}", kMaxSpecTokens), *k);
  }

  const Json& buckets = required(root, "", "buckets", "an object with batch and seq_len", issue);
  if (!buckets.is_object()) issue.expected("buckets", "an object with batch and seq_len", buckets);
  issue.only_known(buckets, "buckets", {"batch", "seq_len"});
  p.batch = parse_bucket(buckets, "batch", issue);
  p.seq_len = parse_bucket(buckets, "seq_len", issue);

  const Json& ops = required(root, "", "ops", "a non-empty array of ops", issue);
  if (!ops.is_array() || ops.size() == 0) issue.expected("ops", "a non-empty array of ops", ops);
  std::set<std::string> labels;
  for (size_t i = 0; i < ops.size(); ++i) {
    PresetOp op = parse_op(ops.at(i), i, p.tp, issue);
    if (!labels.insert(op.label).second)
      issue.expected(fmt::format("ops[{}].label", i), "a label no other op has", Json(op.label));
    p.ops.push_back(std::move(op));
  }
  if (p.spec_tokens > 0) p = with_overrides(std::move(p), std::nullopt, std::nullopt, std::nullopt, p.spec_tokens);
  return p;
}

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& e : detail::embedded_presets()) {
    names.push_back(e.name);
    for (int tp : e.listed_tp) names.push_back(fmt::format("{}-tp{}", e.name, tp));
  }
  return names;
}

Preset load_preset(const std::string& name_or_path, std::optional<int> tp) {
  if (const detail::EmbeddedPreset* e = detail::find_embedded(name_or_path))
    return parse_preset(e->json, "preset " + name_or_path, tp);
  int suffix_tp = 0;
  if (const detail::EmbeddedPreset* e = split_tp_suffix(name_or_path, &suffix_tp)) {
    Preset p = parse_preset(e->json, "preset " + name_or_path, tp ? tp : std::optional<int>(suffix_tp));
    p.name = name_or_path;
    return p;
  }
  bool looks_like_path = name_or_path.find('/') != std::string::npos ||
                         (name_or_path.size() > 5 && name_or_path.compare(name_or_path.size() - 5, 5, ".json") == 0);
  if (looks_like_path || is_file(name_or_path)) return parse_preset(read_file(name_or_path), name_or_path, tp);
  std::string names;
  for (const auto& n : preset_names()) names += (names.empty() ? "" : ", ") + n;
  throw Error(Status::not_found, "presets",
              fmt::format("unknown preset '{}': expected one of {} (any of them with -tpN), or a path to a preset "
                          "JSON file (docs/presets.md)", name_or_path, names));
}

}  // namespace ktune::autotune
