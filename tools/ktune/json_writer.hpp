// Writes one JSON object for --json output (the CLI reads no JSON itself; the library parses inputs).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ktune::cli {

std::string json_quote(const std::string& s);

// Builds `{"k": v, ...}` incrementally; values are inserted verbatim (use json_quote for strings).
class JsonObject {
 public:
  JsonObject& raw(const std::string& key, const std::string& json_value);
  JsonObject& str(const std::string& key, const std::string& value) { return raw(key, json_quote(value)); }
  JsonObject& num(const std::string& key, int64_t value) { return raw(key, std::to_string(value)); }
  JsonObject& real(const std::string& key, double value);
  JsonObject& boolean(const std::string& key, bool value) { return raw(key, value ? "true" : "false"); }
  std::string dump() const { return "{" + body_ + "}"; }

 private:
  std::string body_;
};

std::string json_array(const std::vector<std::string>& json_values);

}  // namespace ktune::cli
