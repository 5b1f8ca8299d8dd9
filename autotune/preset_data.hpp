// Internal: the presets compiled into the library (presets_data.cpp).
#pragma once

#include <string>
#include <vector>

namespace ktune::autotune::detail {

struct EmbeddedPreset {
  const char* name;
  const char* json;             // the preset in the documented format; its "name" equals `name`
  std::vector<int> listed_tp;   // tensor-parallel variants preset_names() lists as "NAME-tpN"
};

const std::vector<EmbeddedPreset>& embedded_presets();
const EmbeddedPreset* find_embedded(const std::string& name);  // nullptr if none

}  // namespace ktune::autotune::detail
