// The headers a generated translation unit pulls in: every `#include "x"` resolved against the embedded
// templates, transitively. Their contents are part of the binary key, and they are handed to the compiler
// as in-memory headers (NVRTC gets no include path, so nothing on disk can leak into a build).
#pragma once

#include <string>
#include <vector>

#include "embedded_templates.hpp"

namespace ktune::detail {

// Sorted by name, each once. Throws Error(internal) for a quoted include that names no embedded template.
std::vector<const EmbeddedFile*> include_closure(const std::string& source);

}  // namespace ktune::detail
