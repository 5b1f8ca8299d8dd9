#include "json_writer.hpp"

#include <cmath>

#include <fmt/format.h>

namespace ktune::cli {

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) out += fmt::format("\\u{:04x}", c);
        else out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

JsonObject& JsonObject::raw(const std::string& key, const std::string& json_value) {
  if (!body_.empty()) body_ += ", ";
  body_ += json_quote(key) + ": " + json_value;
  return *this;
}

JsonObject& JsonObject::real(const std::string& key, double value) {
  return raw(key, std::isfinite(value) ? fmt::format("{:.6g}", value) : "null");
}

std::string json_array(const std::vector<std::string>& json_values) {
  return "[" + fmt::format("{}", fmt::join(json_values, ", ")) + "]";
}

}  // namespace ktune::cli
