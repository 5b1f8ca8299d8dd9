#include "binary_key.hpp"

#include <fmt/format.h>

#include "ktune/cache/sha256.hpp"
#include "source_closure.hpp"

namespace ktune::detail {

std::vector<std::string> normalize_options(const std::vector<std::string>& options) {
  std::vector<std::string> out;
  for (const auto& o : options) {
    size_t b = o.find_first_not_of(" \t\n");
    if (b == std::string::npos) continue;
    size_t e = o.find_last_not_of(" \t\n");
    out.push_back(o.substr(b, e - b + 1));
  }
  return out;
}

std::string source_digest(const std::string& source) {
  cache::Sha256 h;
  // Length-prefix every part so no two different (name, content) sequences hash alike.
  auto part = [&](std::string_view s) {
    std::string len = fmt::format("{}:", s.size());
    h.update(len.data(), len.size());
    h.update(s.data(), s.size());
  };
  part(source);
  for (const EmbeddedFile* f : include_closure(source)) {
    part(f->name);
    part(f->content);
  }
  return h.hex_digest();
}

BinaryKey derive_binary_key(const GeneratedKernel& kernel, const Arch& arch, const std::string& compiler,
                            const std::string& compiler_version, const std::vector<std::string>& options) {
  BinaryKey k;
  k.family = kernel.family;
  k.arch = arch.str();
  k.name = fmt::format("{}/{}/{}/{}", kernel.family, k.arch, kernel.problem_key, kernel.config_key);
  k.compiler = compiler;
  k.compiler_version = compiler_version;
  k.options = fmt::format("{}", fmt::join(normalize_options(options), " "));
  k.source_digest = source_digest(kernel.source);
  k.ktune_version = KTUNE_VERSION_STRING;
  k.entry_points = fmt::format("{}", fmt::join(kernel.entry_points, "\n"));
  std::string material = fmt::format(
      "ktune-binary\nformat={}\nfamily={}\narch={}\ncompiler={}\ncompiler_version={}\noptions={}\n"
      "source={}\nktune={}\nentries={}\n",
      k.format_version, k.family, k.arch, k.compiler, k.compiler_version, k.options, k.source_digest,
      k.ktune_version, k.entry_points);
  k.digest = cache::sha256_hex(material.data(), material.size());
  return k;
}

}  // namespace ktune::detail
