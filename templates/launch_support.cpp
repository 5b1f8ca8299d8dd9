#include "launch_support.hpp"

#include <fmt/format.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>

#include "driver_api.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "log.hpp"

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

const DeviceFacts& current_device(const char* family) {
  const detail::DriverApi& cu = detail::driver();
  CUcontext ctx = nullptr;
  detail::check_cu(cu.cuCtxGetCurrent(&ctx), "cuCtxGetCurrent");
  if (!ctx)
    throw Error(Status::cuda_error, family,
                "no current CUDA context on this thread: make one current first (torch.cuda.set_device, "
                "cuCtxSetCurrent, or ktune::use_device)");
  CUdevice dev = 0;
  detail::check_cu(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  const int ordinal = static_cast<int>(dev);
  thread_local const DeviceFacts* last = nullptr;
  if (last && last->ordinal == ordinal) return *last;

  static std::mutex mutex;
  static std::array<std::unique_ptr<DeviceFacts>, 64> facts;
  if (ordinal < 0 || ordinal >= static_cast<int>(facts.size()))
    throw Error(Status::unsupported, family, fmt::format("device ordinal {} beyond the 64 ktune tracks", ordinal));
  std::lock_guard<std::mutex> lock(mutex);
  if (!facts[ordinal]) {
    auto f = std::make_unique<DeviceFacts>();
    int major = 0, minor = 0;
    detail::check_cu(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                     "cuDeviceGetAttribute(cc major)");
    detail::check_cu(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                     "cuDeviceGetAttribute(cc minor)");
    f->arch = arch_for_compute_capability(major, minor);
    f->limits = device_limits(ordinal);
    int threads = 0;
    if (cu.cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev) == CUDA_SUCCESS && threads > 0)
      f->limits.max_threads_per_block = threads;
    f->ordinal = ordinal;
    facts[ordinal] = std::move(f);
  }
  last = facts[ordinal].get();
  return *last;
}

}  // namespace ktune::launch_support
