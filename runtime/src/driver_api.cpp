#include "driver_api.hpp"
#include "nvrtc_api.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>
#include <string>

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::detail {
namespace {

#define KTUNE_STR2(x) #x
#define KTUNE_STR(x) KTUNE_STR2(x)

struct LoadState {
  DriverApi api;
  std::string error;  // empty when loaded
};

LoadState load_driver() {
  LoadState s;
  const char* override_path = std::getenv("KTUNE_CUDA_DRIVER");
  const char* candidates[] = {override_path, "libcuda.so.1", "/usr/local/nvidia/lib64/libcuda.so.1",
                              "/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1"};
  void* handle = nullptr;
  std::string tried;
  for (const char* c : candidates) {
    if (!c || !*c) continue;
    handle = dlopen(c, RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      s.api.library_path = c;
      break;
    }
    tried += fmt::format("{}{}", tried.empty() ? "" : ", ", c);
  }
  if (!handle) {
    s.error = fmt::format("CUDA driver (libcuda.so.1) not found (tried {}); GPU calls need an NVIDIA driver", tried);
    return s;
  }
#define KTUNE_LOAD(name)                                                                               \
  s.api.name = reinterpret_cast<decltype(s.api.name)>(dlsym(handle, KTUNE_STR(name)));                \
  if (!s.api.name) {                                                                                   \
    s.error = fmt::format("libcuda at {} lacks {}: driver too old for CUDA 13", s.api.library_path,   \
                          KTUNE_STR(name));                                                            \
    return s;                                                                                          \
  }
  KTUNE_DRIVER_FUNCTIONS(KTUNE_LOAD)
#undef KTUNE_LOAD
  CUresult r = s.api.cuInit(0);
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    s.api.cuGetErrorName(r, &name);
    s.error = fmt::format("cuInit failed ({}): no usable GPU or driver", name ? name : "?");
    if (r == CUDA_ERROR_NOT_INITIALIZED && forked_after_nvrtc())
      s.error = fmt::format(
          "cuInit failed ({}): this process was forked from one that had already loaded NVRTC (ktune compiled "
          "or looked up a kernel there), and CUDA cannot be initialised in such a child; start workers with "
          "spawn/exec instead of fork, or create ktune's runtime only in the workers",
          name ? name : "?");
  }
  return s;
}

const LoadState& state() {
  static const LoadState s = load_driver();
  return s;
}

}  // namespace

const DriverApi* try_driver(std::string* why_not) {
  const LoadState& s = state();
  if (!s.error.empty()) {
    if (why_not) *why_not = s.error;
    return nullptr;
  }
  return &s.api;
}

const DriverApi& driver() {
  std::string why;
  const DriverApi* api = try_driver(&why);
  if (!api) throw Error(Status::no_driver, "driver", why);
  return *api;
}

void check_cu(CUresult result, const char* what) {
  if (result == CUDA_SUCCESS) return;
  const char* name = "?";
  const char* text = "";
  if (const DriverApi* api = try_driver()) {
    api->cuGetErrorName(result, &name);
    api->cuGetErrorString(result, &text);
  }
  throw Error(Status::cuda_error, "driver", fmt::format("{} failed: {} ({})", what, name, text ? text : ""));
}

uint64_t context_id(CUcontext ctx) {
  unsigned long long id = 0;
  if (!ctx || driver().cuCtxGetId(ctx, &id) != CUDA_SUCCESS) return 0;
  return static_cast<uint64_t>(id) + 1;
}

uint64_t current_context_id(CUcontext* handle) {
  const DriverApi& cu = driver();
  check_cu(cu.cuCtxGetCurrent(handle), "cuCtxGetCurrent");
  if (!*handle) return 0;
  unsigned long long id = 0;
  check_cu(cu.cuCtxGetId(*handle, &id), "cuCtxGetId (the current context)");
  return static_cast<uint64_t>(id) + 1;
}

}  // namespace ktune::detail
