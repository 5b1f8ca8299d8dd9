#include "host_plugin_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::detail {
namespace {

struct LoadState {
  HostPlugin plugin;
  std::string error;
};

// The directory of the shared object (or executable) this function was linked into.
std::string own_directory() {
  Dl_info info{};
  if (!dladdr(reinterpret_cast<void*>(&own_directory), &info) || !info.dli_fname) return {};
  std::error_code ec;
  std::filesystem::path p = std::filesystem::canonical(info.dli_fname, ec);
  if (ec) p = info.dli_fname;
  return p.parent_path().string();
}

std::vector<std::string> candidate_paths() {
  std::vector<std::string> out;
  if (const char* p = std::getenv("KTUNE_HOST_PLUGIN"); p && *p) out.emplace_back(p);
  const std::string dir = own_directory();
  if (!dir.empty()) {
    out.push_back(dir + "/libktune_host.so");
    out.push_back(dir + "/../lib/libktune_host.so");
  }
  out.emplace_back("libktune_host.so");
  return out;
}

LoadState load_plugin() {
  LoadState s;
  std::string tried;
  void* handle = nullptr;
  for (const std::string& c : candidate_paths()) {
    // A path that does not exist is only listed; a library that exists but fails to load says why (a missing
    // libLLVM-19.so.1, say), which is the message the user needs.
    const bool is_path = c.find('/') != std::string::npos;
    std::error_code ec;
    if (is_path && !std::filesystem::exists(c, ec)) {
      tried += fmt::format("{}{} (absent)", tried.empty() ? "" : ", ", c);
      continue;
    }
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      s.plugin.library_path = c;
      break;
    }
    const char* err = dlerror();
    tried += fmt::format("{}{} ({})", tried.empty() ? "" : ", ", c, err ? err : "dlopen failed");
  }
  if (!handle) {
    s.error = fmt::format(
        "the host backend libktune_host.so (LLVM 19) could not be loaded: tried {}. It is built when LLVM 19 "
        "is present (Debian: llvm-19-dev libclang-cpp19-dev libclang-19-dev); set KTUNE_HOST_PLUGIN to its path",
        tried);
    return s;
  }
  auto entry = reinterpret_cast<ktune_host_plugin_v1_fn>(dlsym(handle, KTUNE_HOST_PLUGIN_ENTRY));
  if (!entry) {
    s.error = fmt::format("{} has no {} entry point: not a ktune host plugin", s.plugin.library_path,
                          KTUNE_HOST_PLUGIN_ENTRY);
    return s;
  }
  const ktune_host_plugin_v1_t* api = entry();
  if (!api || api->abi_version != KTUNE_HOST_PLUGIN_ABI_VERSION || api->struct_size < sizeof(ktune_host_plugin_v1_t)) {
    s.error = fmt::format("{} speaks host plugin ABI {} (table of {} bytes); this libktune needs ABI {} ({} bytes)",
                          s.plugin.library_path, api ? api->abi_version : 0u, api ? api->struct_size : 0u,
                          KTUNE_HOST_PLUGIN_ABI_VERSION, sizeof(ktune_host_plugin_v1_t));
    return s;
  }
  s.plugin.api = api;
  s.plugin.target_id = api->target_id();
  s.plugin.llvm_version = api->llvm_version();
  s.plugin.cpu_name = api->cpu_name();
  return s;  // the handle stays open for the life of the process
}

const LoadState& state() {
  static const LoadState s = load_plugin();
  return s;
}

}  // namespace

const HostPlugin* try_host_plugin(std::string* why_not) {
  const LoadState& s = state();
  if (!s.error.empty()) {
    if (why_not) *why_not = s.error;
    return nullptr;
  }
  return &s.plugin;
}

const HostPlugin& host_plugin() {
  std::string why;
  const HostPlugin* p = try_host_plugin(&why);
  if (!p) throw Error(Status::no_compiler, "host", why);
  return *p;
}

}  // namespace ktune::detail
