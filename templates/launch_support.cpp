#include "launch_support.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <system_error>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ktune/error.hpp"
#include "ktune_internal/log.hpp"

namespace ktune::launch_support {

void warn_unusable_tuned(const char* family, const std::string& tuning_key, const std::string& tuned,
                         const std::string& why) {
  static std::mutex mutex;
  static std::unordered_set<std::string> warned;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (!warned.insert(std::string(family) + "|" + tuning_key + "|" + tuned).second) return;
  }
  detail::log(detail::LogLevel::warn, "{}: tuned config '{}' for {} is unusable ({}); using the default", family,
              tuned, tuning_key, why);
}

void bad_arg(const char* family, const std::string& field, const std::string& expected, const std::string& got) {
  throw Error(Status::invalid_argument, family, fmt::format("{}: expected {}, got {}", field, expected, got));
}

std::string ptr_text(const void* p) { return p ? fmt::format("{}", p) : std::string("null"); }

void need_device_ptr(const char* family, const void* p, const char* field, size_t align) {
  if (!p) bad_arg(family, field, "a device pointer", "null");
  if (reinterpret_cast<uintptr_t>(p) % align != 0)
    bad_arg(family, field, fmt::format("a {}-byte aligned device pointer", align), ptr_text(p));
}

float* host_split_workspace(const char* family, int splits, size_t need, void* workspace, size_t workspace_bytes) {
  if (splits <= 1) return nullptr;
  if (workspace) {
    if (workspace_bytes < need)
      bad_arg(family, "workspace_bytes", fmt::format(">= {} ({} splits), or a null workspace", need, splits),
              std::to_string(workspace_bytes));
    return static_cast<float*>(workspace);
  }
  thread_local std::vector<float> scratch;
  const size_t n = (need + sizeof(float) - 1) / sizeof(float);
  if (scratch.size() < n) scratch.resize(n);
  return scratch.data();
}

std::future<void> start_binary(Runtime& rt, std::function<GeneratedKernel()> generate, const Arch& arch) {
  try {
    return std::async(std::launch::async,
                      [&rt, generate = std::move(generate), arch] { rt.ensure_binary(generate(), arch); });
  } catch (const std::system_error&) {
    return {};
  }
}

}  // namespace ktune::launch_support
