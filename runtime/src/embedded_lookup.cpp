#include <algorithm>

#include "embedded_templates.hpp"

namespace ktune::detail {

const EmbeddedFile* find_embedded(std::string_view name) {
  const auto& files = embedded_templates();
  auto it = std::lower_bound(files.begin(), files.end(), name,
                             [](const EmbeddedFile& f, std::string_view n) { return std::string_view(f.name) < n; });
  if (it != files.end() && std::string_view(it->name) == name) return &*it;
  return nullptr;
}

}  // namespace ktune::detail
