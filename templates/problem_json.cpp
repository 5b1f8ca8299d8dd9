#include "problem_json.hpp"

#include <climits>

#include <fmt/format.h>

namespace ktune {
namespace problem_json {
namespace {

using cache::Json;
using Kind = ProblemField::Kind;

std::string describe(const ProblemField& f) {
  switch (f.kind) {
    case Kind::positive_int: return "a positive integer";
    case Kind::boolean: return "true or false";
    case Kind::choice: break;
  }
  std::string s = "one of ";
  for (size_t i = 0; i < f.choices.size(); ++i) s += fmt::format("{}\"{}\"", i ? ", " : "", f.choices[i]);
  return s;
}

bool matches(const ProblemField& f, const Json& v) {
  switch (f.kind) {
    case Kind::positive_int: return v.is_int() && v.as_int() > 0 && v.as_int() <= INT_MAX;
    case Kind::boolean: return v.is_bool();
    case Kind::choice:
      if (!v.is_string()) return false;
      for (const auto& c : f.choices)
        if (v.as_string() == c) return true;
      return false;
  }
  return false;
}

}  // namespace

std::string shown(const Json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

Json checked(const std::string& family, const std::vector<ProblemField>& fields, const Json& problem) {
  if (!problem.is_object())
    throw ProblemFieldError(family, "", "expected an object of problem fields, got " + shown(problem));
  for (const auto& [key, value] : problem.members()) {
    bool known = false;
    for (const auto& f : fields) known = known || f.name == key;
    if (known) continue;
    std::string list;
    for (const auto& f : fields) list += fmt::format("{}{}", list.empty() ? "" : ", ", f.name);
    throw ProblemFieldError(family, key, fmt::format("unknown field (expected one of {})", list));
  }
  Json out = Json::object();
  for (const auto& f : fields) {
    const Json* v = problem.find(f.name);
    if (!v) {
      if (f.required) throw ProblemFieldError(family, f.name, fmt::format("required field missing (expected {})", describe(f)));
      continue;
    }
    if (!matches(f, *v)) throw ProblemFieldError(family, f.name, fmt::format("expected {}, got {}", describe(f), shown(*v)));
    out.set(f.name, *v);
  }
  return out;
}

Json checked(const std::string& family, const std::vector<ProblemField>& fields, const std::string& text) {
  Json j;
  try {
    j = Json::parse(text);
  } catch (const cache::JsonError& e) {
    throw ProblemFieldError(family, "", fmt::format("not valid JSON: {}", e.what()));
  }
  return checked(family, fields, j);
}

int int_or(const Json& j, const char* name, int fallback) {
  const Json* v = j.find(name);
  return v ? static_cast<int>(v->as_int()) : fallback;
}

bool bool_or(const Json& j, const char* name, bool fallback) {
  const Json* v = j.find(name);
  return v ? v->as_bool() : fallback;
}

std::string string_or(const Json& j, const char* name, const std::string& fallback) {
  const Json* v = j.find(name);
  return v ? v->as_string() : fallback;
}

void divide(const std::string& family, Json& j, const char* name, int tp) {
  const int v = int_or(j, name, 0);
  if (v % tp != 0) throw ProblemFieldError(family, name, fmt::format("expected a multiple of tp ({}), got {}", tp, v));
  j.set(name, v / tp);
}

}  // namespace problem_json

std::string canonical_problem_json(const FamilyInfo& f, const std::string& problem_json) {
  const std::string out = problem_json::checked(f.name, f.problem_fields, problem_json).dump();
  if (f.check_problem_fields) f.check_problem_fields(out);
  return out;
}

}  // namespace ktune
