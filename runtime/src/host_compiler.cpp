#include "host_compiler.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "host_plugin_api.hpp"
#include "ktune/error.hpp"
#include "source_closure.hpp"

namespace ktune::detail {
namespace {

std::string entry_symbol(size_t i) { return fmt::format("ktune_host_entry_{}", i); }

// Takes ownership of a plugin-allocated C string.
std::string take_text(const HostPlugin& hp, char* p) {
  std::string s = p ? std::string(p) : std::string();
  if (p) hp.api->free_buffer(p);
  return s;
}

}  // namespace

std::vector<std::string> host_options(const GeneratedKernel& kernel) {
  // -O3 for the front end (the plugin runs LLVM's O3 pipeline itself); KTUNE_HOST_JIT lets shared headers
  // leave out what only a hosted build (tools, tests) may use.
  std::vector<std::string> opts = {"-std=c++17", "-O3", "-DKTUNE_HOST_JIT=1"};
  for (const auto& o : kernel.options) opts.push_back(o);
  return opts;
}

std::string host_translation_unit(const GeneratedKernel& kernel) {
  std::string tu = kernel.source;
  if (!tu.empty() && tu.back() != '\n') tu += '\n';
  tu += "// ---- entry points (appended by ktune's host compiler front) ----\n";
  for (size_t i = 0; i < kernel.entry_points.size(); ++i) {
    const std::string& e = kernel.entry_points[i];
    tu += fmt::format("extern \"C\" {{ __attribute__((used)) decltype(&({0})) {1} = &({0}); }}\n", e,
                      entry_symbol(i));
  }
  return tu;
}

CompiledBinary compile_on_host(const GeneratedKernel& kernel, const std::vector<std::string>& options) {
  const HostPlugin& hp = host_plugin();
  const std::string name = fmt::format("{}/host/{}/{}", kernel.family, kernel.problem_key, kernel.config_key);
  const std::string joined = fmt::format("{}", fmt::join(options, " "));
  auto t0 = std::chrono::steady_clock::now();

  const std::string tu = host_translation_unit(kernel);
  ktune_host_file source{kernel.family.c_str(), tu.data(), tu.size()};
  std::vector<ktune_host_file> headers;
  for (const EmbeddedFile* f : include_closure(kernel.source))
    headers.push_back({f->name, f->content, std::char_traits<char>::length(f->content)});
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());

  void* object = nullptr;
  size_t object_size = 0;
  char* log_c = nullptr;
  const int rc = hp.api->compile(&source, headers.data(), headers.size(), argv.data(), argv.size(), &object,
                                 &object_size, &log_c);
  std::string log = take_text(hp, log_c);
  if (rc != 0 || !object) {
    if (object) hp.api->free_buffer(object);
    throw CompileError(name, log, joined,
                       fmt::format("LLVM ({}) failed to compile {} for {} with options [{}]:\n{}", hp.llvm_version,
                                   name, hp.cpu_name, joined, log));
  }
  CompiledBinary out;
  out.cubin.assign(static_cast<const uint8_t*>(object), static_cast<const uint8_t*>(object) + object_size);
  hp.api->free_buffer(object);
  out.log = std::move(log);
  for (size_t i = 0; i < kernel.entry_points.size(); ++i) out.lowered_names.push_back(entry_symbol(i));
  out.compile_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

bool environment_refused(const std::string& link_error) {
  for (const char* os_refusal : {"Permission denied", "Operation not permitted", "Cannot allocate memory"})
    if (link_error.find(os_refusal) != std::string::npos) return true;
  // "Symbols not found: [ log2f ]": a library symbol the process does not provide. An object's own symbols are
  // ktune's (its binding and entry symbols, its templates' mangled names: _ZN9ktune_xqa...): one of those missing
  // is the object's fault.
  const std::string marker = "Symbols not found: [";
  for (size_t at = link_error.find(marker); at != std::string::npos; at = link_error.find(marker, at + 1)) {
    const size_t begin = at + marker.size(), end = link_error.find(']', begin);
    std::string names = link_error.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    std::replace(names.begin(), names.end(), ',', ' ');
    std::istringstream list(names);
    for (std::string name; list >> name;)
      if (name.find("ktune") == std::string::npos) return true;
  }
  return false;
}

void load_host_object(const std::vector<uint8_t>& object, const std::string& name, const BoundSymbols& symbols,
                      LoadedKernel* kernel) {
  const HostPlugin& hp = host_plugin();
  void* handle = nullptr;
  char* err = nullptr;
  // A refused object, or one that does not link (a relocation the JIT cannot apply, a symbol of its own missing),
  // is the binary's fault: UnloadableBinary, quarantined and dropped from the cache. What stops the JIT for every
  // object alike -- no JIT, no memory, executable memory refused, a library symbol the process cannot resolve --
  // is an Error, and the cached object is kept.
  const int rc = hp.api->load(object.data(), object.size(), name.c_str(), &handle, &err);
  if (rc == 2) throw UnloadableBinary(fmt::format("{}: the host object does not load: {}", name, take_text(hp, err)));
  if (rc != 0 || !handle)
    throw Error(Status::unsupported, "host",
                fmt::format("{}: the host JIT cannot load it here (the cached object is kept): {}", name,
                            take_text(hp, err)));
  kernel->module = handle;
  kernel->context = nullptr;
  auto fail = [&](const std::string& sym, const std::string& why) {
    hp.api->unload(handle);
    kernel->module = nullptr;
    kernel->functions.clear();
    if (environment_refused(why))
      throw Error(Status::unsupported, "host",
                  fmt::format("{}: symbol {} cannot be linked in this process (the cached object is kept): {}", name,
                              sym, why));
    throw UnloadableBinary(fmt::format("{}: symbol {} does not resolve: {}", name, sym, why));
  };
  // The binding symbol first: an object of another key must not even have its entry points looked up.
  if (!hp.api->lookup(handle, symbols.binding.c_str(), &err)) fail(symbols.binding, take_text(hp, err));
  for (const std::string& sym : symbols.kernels) {
    void* addr = hp.api->lookup(handle, sym.c_str(), &err);
    if (!addr) fail(sym, take_text(hp, err));
    // The symbol is the pointer variable of the trailer: the entry point is the address stored in it.
    kernel->functions.push_back(*static_cast<void* const*>(addr));
  }
}

void unload_host_object(void* handle) {
  if (!handle) return;
  if (const HostPlugin* hp = try_host_plugin()) hp->api->unload(handle);
}

}  // namespace ktune::detail
