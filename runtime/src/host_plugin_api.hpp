// The host backend plugin (libktune_host.so, LLVM 19) loaded with dlopen: libktune.so never links LLVM, so a
// GPU-only deployment never needs it. The plugin's C ABI is runtime/host/ktune_host_plugin.h.
#pragma once

#include <string>

#include "runtime/host/ktune_host_plugin.h"

namespace ktune::detail {

struct HostPlugin {
  const ktune_host_plugin_v1_t* api = nullptr;
  std::string library_path;
  std::string target_id;     // "<triple>/<cpu>/<+features>;llvm <version>": the host compiler_version
  std::string llvm_version;  // "19.1.7"
  std::string cpu_name;      // "znver3"
};

// Process-wide plugin, loaded on first use. Search order: $KTUNE_HOST_PLUGIN (an explicit path wins), then
// libktune_host.so next to the binary holding libktune's code (found with dladdr: the directory of
// libktune.so, or of a program that links ktune statically, and its ../lib), then the loader path.
// try_host_plugin returns null and says where it looked; host_plugin throws Error(no_compiler, "host").
const HostPlugin* try_host_plugin(std::string* why_not = nullptr);
const HostPlugin& host_plugin();

}  // namespace ktune::detail
