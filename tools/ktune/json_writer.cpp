#include "json_writer.hpp"

#include <cmath>
#include <cstdlib>

#include <fmt/format.h>

namespace ktune::cli {

using cache::Json;

std::string json_quote(const std::string& s) { return Json(s).dump(); }

JsonObject& JsonObject::raw(const std::string& key, const std::string& json_value) {
  obj_.set(key, Json::parse(json_value));
  return *this;
}

JsonObject& JsonObject::str(const std::string& key, const std::string& value) {
  obj_.set(key, Json(value));
  return *this;
}

JsonObject& JsonObject::num(const std::string& key, int64_t value) {
  obj_.set(key, Json(value));
  return *this;
}

JsonObject& JsonObject::real(const std::string& key, double value) {
  // Round through the 6-significant-digit text so the shortest round-trip form prints those digits only.
  obj_.set(key, std::isfinite(value) ? Json(std::strtod(fmt::format("{:.6g}", value).c_str(), nullptr)) : Json());
  return *this;
}

JsonObject& JsonObject::boolean(const std::string& key, bool value) {
  obj_.set(key, Json(value));
  return *this;
}

std::string JsonObject::dump() const { return obj_.dump(Json::kOneLine); }

std::string json_array(const std::vector<std::string>& json_values) {
  Json a = Json::array();
  for (const auto& v : json_values) a.push(Json::parse(v));
  return a.dump(Json::kOneLine);
}

}  // namespace ktune::cli
