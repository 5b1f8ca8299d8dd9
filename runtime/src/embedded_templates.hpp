// The device templates compiled into the library (generated from templates/ at build time).
#pragma once

#include <string_view>
#include <vector>

namespace ktune::detail {

struct EmbeddedFile {
  const char* name;     // path relative to templates/, e.g. "common/numerics.cuh" — the include name
  const char* content;
};

// Sorted by name.
const std::vector<EmbeddedFile>& embedded_templates();
const EmbeddedFile* find_embedded(std::string_view name);

}  // namespace ktune::detail
