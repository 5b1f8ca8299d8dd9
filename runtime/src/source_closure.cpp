#include "source_closure.hpp"

#include <algorithm>
#include <set>
#include <sstream>

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::detail {
namespace {

// Quoted include targets of `text`, in order. Only `#include "..."` lines count; angle includes would reach
// outside ktune and are rejected by the compiler front, not here.
std::vector<std::string> quoted_includes(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    size_t i = line.find_first_not_of(" \t");
    if (i == std::string::npos || line[i] != '#') continue;
    i = line.find_first_not_of(" \t", i + 1);
    if (i == std::string::npos || line.compare(i, 7, "include") != 0) continue;
    size_t open = line.find('"', i + 7);
    if (open == std::string::npos) continue;
    size_t close = line.find('"', open + 1);
    if (close == std::string::npos) continue;
    out.push_back(line.substr(open + 1, close - open - 1));
  }
  return out;
}

}  // namespace

std::vector<const EmbeddedFile*> include_closure(const std::string& source) {
  std::set<std::string> seen;
  std::vector<const EmbeddedFile*> result;
  std::vector<std::string> pending = quoted_includes(source);
  while (!pending.empty()) {
    std::string name = pending.back();
    pending.pop_back();
    if (!seen.insert(name).second) continue;
    const EmbeddedFile* f = find_embedded(name);
    if (!f) {
      // A relative include from inside a header ("numerics.cuh" from common/x.cuh) is resolved by NVRTC
      // against the including header's directory; ktune requires template-root-relative names instead.
      throw Error(Status::internal, "templates",
                  fmt::format("#include \"{}\" names no embedded template (use paths relative to templates/, "
                              "e.g. \"common/numerics.cuh\")",
                              name));
    }
    result.push_back(f);
    for (auto& inc : quoted_includes(f->content)) pending.push_back(inc);
  }
  std::sort(result.begin(), result.end(),
            [](const EmbeddedFile* a, const EmbeddedFile* b) { return std::string_view(a->name) < b->name; });
  return result;
}

}  // namespace ktune::detail
