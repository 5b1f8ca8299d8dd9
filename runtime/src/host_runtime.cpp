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
  const std::string fp = host_fingerprint();
  const std::string memo_key = family + "\n" + key + "\n" + fp;
  {
    std::lock_guard<std::mutex> lock(impl_->tuning_mutex);
    auto it = impl_->tuned.find(memo_key);
    if (it != impl_->tuned.end()) {
      if (it->second.empty()) impl_->stats.tuning_misses++;
      return it->second;
    }
  }
  std::string winner;
  try {
    if (auto row = impl_->cache->get_tuning(family, key, fp)) winner = row->winner_config;
  } catch (const std::exception& e) {
    log(LogLevel::warn, "tuning lookup {} {} failed ({}); using the default config", family, key, e.what());
  }
  std::lock_guard<std::mutex> lock(impl_->tuning_mutex);
  impl_->tuned[memo_key] = winner;
  if (winner.empty()) {
    impl_->stats.tuning_misses++;
    log(LogLevel::info, "no tuned config for {} {} on the host; using the default", family, key);
  }
  return winner;
}

void Runtime::remember_host_tuned_config(const std::string& family, const std::string& key, const std::string& config) {
  const std::string fp = host_fingerprint();
  std::lock_guard<std::mutex> lock(impl_->tuning_mutex);
  impl_->tuned[family + "\n" + key + "\n" + fp] = config;
  impl_->tuning_generation.fetch_add(1, std::memory_order_release);
}

}  // namespace ktune
