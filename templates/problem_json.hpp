// A family's problem as JSON, checked against its one schema (FamilyInfo::problem_fields): what every
// family.cpp builds its problem_from_json, shard and spec-token rules on, and what canonical_problem_json
// (ktune/family.hpp) runs for presets. Every error is a ProblemFieldError naming the member.
#pragma once

#include <string>
#include <vector>

#include "ktune/cache/json.hpp"
#include "ktune/family.hpp"

namespace ktune::problem_json {

// Parses `text` and checks it against `fields`: an object, no unknown member, every required member present,
// each of its kind (a positive int that fits in int, a bool, one of the choices). Returns the object with its
// members in `fields` order, defaults not filled in.
cache::Json checked(const std::string& family, const std::vector<ProblemField>& fields, const std::string& text);
// The same for an object already parsed.
cache::Json checked(const std::string& family, const std::vector<ProblemField>& fields, const cache::Json& problem);

// Members of a checked object, or `fallback` when absent.
int int_or(const cache::Json& j, const char* name, int fallback);
bool bool_or(const cache::Json& j, const char* name, bool fallback);
std::string string_or(const cache::Json& j, const char* name, const std::string& fallback);

// `name` divided by tp in place; a member that tp does not divide is a ProblemFieldError.
void divide(const std::string& family, cache::Json& j, const char* name, int tp);

// "<value as JSON>" cut to 60 characters, for "got ..." in messages.
std::string shown(const cache::Json& v);

}  // namespace ktune::problem_json
