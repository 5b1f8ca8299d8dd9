#include "binary_key.hpp"

#include <unordered_set>

#include <fmt/format.h>

#include "elf_symbols.hpp"
#include "ktune/cache/sha256.hpp"
#include "ktune/error.hpp"
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
  // The key joins the options with spaces: an option holding whitespace ("-DA=1 -DB=2") would key alike with the
  // options it reads as, and compile as something else. One option per entry.
  for (size_t i = 0; i < kernel.options.size(); ++i)
    if (kernel.options[i].find_first_of(" \t\n\r\v\f") != std::string::npos)
      throw Error(Status::invalid_argument, "runtime",
                  fmt::format("{}/{}: options[{}]: expected one compiler option without whitespace (pass each "
                              "option as its own entry), got '{}'",
                              kernel.family, kernel.config_key, i, kernel.options[i]));
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
  // Everything above but the compiler version: the same config compiled by another NVRTC defines the same
  // symbol, any other config (source, options, arch, entry points) another one. 128 bits are plenty to tell
  // keys apart; the symbol is not a secret (anyone who can write the cache can write code).
  std::string binding = fmt::format(
      "ktune-binding\nformat={}\nfamily={}\narch={}\ncompiler={}\noptions={}\nsource={}\nktune={}\nentries={}\n",
      k.format_version, k.family, k.arch, k.compiler, k.options, k.source_digest, k.ktune_version, k.entry_points);
  k.binding_symbol = "ktune_bind_" + cache::sha256_hex(binding.data(), binding.size()).substr(0, 32);
  return k;
}

GeneratedKernel bound_kernel(const GeneratedKernel& kernel, const BinaryKey& key, bool host) {
  GeneratedKernel bound = kernel;
  if (!bound.source.empty() && bound.source.back() != '\n') bound.source += '\n';
  // A device global on the GPU (cuModuleGetGlobal finds it), a kept C global on the host (the plugin's
  // symbol lookup finds it). The value is never read.
  bound.source += fmt::format("// ---- binding symbol (appended by ktune: the binary belongs to this key) ----\n"
                              "extern \"C\" {} const unsigned {} = 1u;\n",
                              host ? "__attribute__((used))" : "__device__", key.binding_symbol);
  return bound;
}

std::string entry_points_column(const std::vector<std::string>& kernel_symbols, const BinaryKey& key) {
  std::string out;
  for (const std::string& s : kernel_symbols) out += s + "\n";
  return out + key.binding_symbol;
}

BoundSymbols parse_entry_points(const std::string& column, size_t expected_kernels,
                                const std::string& expected_binding, std::string* why) {
  BoundSymbols out;
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= column.size()) {
    size_t end = column.find('\n', start);
    if (end == std::string::npos) end = column.size();
    if (end > start) lines.push_back(column.substr(start, end - start));
    start = end + 1;
  }
  why->clear();
  if (lines.empty() || lines.back().rfind("ktune_bind_", 0) != 0) {
    *why = "its entry points name no binding symbol (written by an older ktune, or not by ktune)";
    return out;
  }
  out.binding = lines.back();
  lines.pop_back();
  out.kernels = std::move(lines);
  if (!expected_binding.empty() && out.binding != expected_binding)
    *why = fmt::format("it is bound to {} but this key's binary is bound to {} (a binary of another kernel)",
                       out.binding, expected_binding);
  else if (expected_kernels != kAnyKernelCount && out.kernels.size() != expected_kernels)
    *why = fmt::format("it lists {} entry points but the kernel has {}", out.kernels.size(), expected_kernels);
  return out;
}

std::string binding_problem(const cache::BinaryRecord& rec, size_t expected_kernels,
                            const std::string& expected_binding) {
  std::string why;
  BoundSymbols symbols = parse_entry_points(rec.entry_points, expected_kernels, expected_binding, &why);
  if (!why.empty()) return why;
  std::unordered_set<std::string> defined;
  if (!elf_defined_symbols(rec.blob.data(), rec.blob.size(), &defined, &why))
    return "its blob is not a loadable object: " + why;
  if (!defined.count(symbols.binding))
    return fmt::format("its blob does not define its binding symbol {} (a binary of another kernel)",
                       symbols.binding);
  for (const std::string& k : symbols.kernels)
    if (!defined.count(k)) return fmt::format("its blob does not define entry point {}", k);
  return {};
}

}  // namespace ktune::detail
