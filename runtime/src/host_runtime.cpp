// Runtime members for the host CPU target: plugin presence, the host fingerprint, tuned configs on the host.
// (Binaries and modules of the host target go through runtime.cpp / module_table.cpp like every arch.)
#include <thread>

#include <fmt/format.h>

#include "host_plugin_api.hpp"
#include "ktune/error.hpp"
#include "ktune_internal/log.hpp"
#include "runtime_impl.hpp"

namespace ktune {
using namespace detail;

bool Runtime::host_available(std::string* why) { return try_host_plugin(why) != nullptr; }

std::string Runtime::host_target_id() { return host_plugin().target_id; }

std::string Runtime::host_fingerprint() {
  // CPU name + features + LLVM version (the target id) and the core count the launches split work over.
  static const std::string fp = fmt::format("{};cores={}", host_plugin().target_id,
                                            std::max(1u, std::thread::hardware_concurrency()));
  return fp;
}

std::string Runtime::host_tuned_config(const std::string& family, const std::string& key) {
  return impl_->tuned_config_for(family, key, host_fingerprint(), "the host");
}

void Runtime::remember_host_tuned_config(const std::string& family, const std::string& key, const std::string& config) {
  impl_->remember_tuned_config_for(family, key, host_fingerprint(), config);
}

}  // namespace ktune
