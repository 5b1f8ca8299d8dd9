// Fuzz target: the JSON parser (cache/src/json_parse.cpp) and the preset parser on top of it.
// Properties: parse() throws only JsonError; a parsed value dumps to JSON that parses back to an equal value;
// parse_preset() throws only ktune::Error(invalid_argument) with the origin in the message.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "autotune/presets.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  using ktune::cache::Json;
  try {
    Json v = Json::parse(text);
    const std::string compact = v.dump(), pretty = v.dump(2);
    if (Json::parse(compact) != v || Json::parse(pretty) != v) std::abort();  // round trip
    if (Json::parse(compact).dump() != compact) std::abort();                 // dump is canonical
  } catch (const ktune::cache::JsonError&) {
  }
  try {
    ktune::autotune::parse_preset(std::string(text), "fuzz.json");
  } catch (const ktune::Error& e) {
    if (e.status() != ktune::Status::invalid_argument) std::abort();
    if (std::string(e.what()).find("fuzz.json") == std::string::npos) std::abort();
  }
  return 0;
}
