// Builds the one JSON object a command prints for --json, on the library's JSON value (ktune/cache/json.hpp),
// so the CLI has no serializer of its own. Output is one line with ", " and ": " separators.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ktune/cache/json.hpp"

namespace ktune::cli {

// `s` as a JSON string literal, quotes included.
std::string json_quote(const std::string& s);

// Builds `{"k": v, ...}` in insertion order. raw() takes a value that is already JSON text (e.g. another
// JsonObject's dump() or json_array()); it is parsed, so a malformed value throws instead of being printed.
class JsonObject {
 public:
  JsonObject& raw(const std::string& key, const std::string& json_value);
  JsonObject& str(const std::string& key, const std::string& value);
  JsonObject& num(const std::string& key, int64_t value);
  // Finite values keep 6 significant digits (timings); NaN and infinities print as null.
  JsonObject& real(const std::string& key, double value);
  JsonObject& boolean(const std::string& key, bool value);
  std::string dump() const;

 private:
  cache::Json obj_ = cache::Json::object();
};

// `[v, ...]` from values that are already JSON text.
std::string json_array(const std::vector<std::string>& json_values);

}  // namespace ktune::cli
