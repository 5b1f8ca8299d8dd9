#include "nvrtc_api.hpp"

#include <pthread.h>

#include <atomic>

#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::detail {
namespace {

#define KTUNE_STR2(x) #x
#define KTUNE_STR(x) KTUNE_STR2(x)

struct LoadState {
  NvrtcApi api;
  std::string error;
};

std::vector<std::string> candidate_paths() {
  std::vector<std::string> out;
  if (const char* p = std::getenv("KTUNE_NVRTC")) out.emplace_back(p);
  out.emplace_back("libnvrtc.so.13");
  out.emplace_back("libnvrtc.so");
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* home = std::getenv(var)) out.push_back(std::string(home) + "/lib64/libnvrtc.so.13");
  }
  out.emplace_back("/usr/local/cuda/lib64/libnvrtc.so.13");
  return out;
}

// nvrtcVersion gives only major.minor; the build number (which changes code generation) is read from the
// banner NVRTC writes into the PTX of a trivial program ("Cuda compilation tools, release 13.0, V13.0.88").
std::string read_full_version(const NvrtcApi& api) {
  int major = 0, minor = 0;
  api.nvrtcVersion(&major, &minor);
  std::string version = fmt::format("{}.{}", major, minor);
  nvrtcProgram prog = nullptr;
  if (api.nvrtcCreateProgram(&prog, "extern \"C\" __global__ void ktune_probe() {}", "probe.cu", 0, nullptr,
                             nullptr) != NVRTC_SUCCESS)
    return version;
  // Once per process: --minimal skips most of the built-in prelude.
  const char* opts[] = {"--gpu-architecture=compute_80", "--minimal"};
  const int nopts = nvrtc_takes_minimal(version) ? 2 : 1;
  if (api.nvrtcCompileProgram(prog, nopts, opts) == NVRTC_SUCCESS) {
    size_t size = 0;
    api.nvrtcGetPTXSize(prog, &size);
    std::string ptx(size, '\0');
    api.nvrtcGetPTX(prog, ptx.data());
    std::smatch m;
    static const std::regex banner(R"(V(\d+\.\d+\.\d+))");
    if (std::regex_search(ptx, m, banner)) version = m[1];
  }
  api.nvrtcDestroyProgram(&prog);
  return version;
}

std::atomic<bool>& forked_after_nvrtc_flag() {
  static std::atomic<bool> flag{false};
  return flag;
}

LoadState load_nvrtc() {
  LoadState s;
  void* handle = nullptr;
  std::string tried;
  for (const std::string& c : candidate_paths()) {
    handle = dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle) {
      s.api.library_path = c;
      break;
    }
    tried += (tried.empty() ? "" : ", ") + c;
  }
  if (!handle) {
    s.error = fmt::format(
        "NVRTC not found (tried {}); compiling kernels needs the CUDA 13 NVRTC library — set KTUNE_NVRTC or "
        "CUDA_HOME, or ship a cache that already holds every kernel (ktune warmup / ktune compile)",
        tried);
    return s;
  }
#define KTUNE_LOAD(name)                                                                                   \
  s.api.name = reinterpret_cast<decltype(s.api.name)>(dlsym(handle, KTUNE_STR(name)));                    \
  if (!s.api.name) {                                                                                       \
    s.error = fmt::format("NVRTC at {} lacks {}: need NVRTC from CUDA 12.0 or newer", s.api.library_path,  \
                          KTUNE_STR(name));                                                                \
    return s;                                                                                              \
  }
  KTUNE_NVRTC_FUNCTIONS(KTUNE_LOAD)
#undef KTUNE_LOAD
  s.api.version = read_full_version(s.api);
  // NVRTC may initialise the CUDA driver; CUDA cannot then be initialised in a child forked from this process.
  // Remember such a fork so the driver loader can say why its cuInit fails (driver_api.cpp).
  pthread_atfork(nullptr, nullptr, [] { forked_after_nvrtc_flag().store(true); });
  return s;
}

const LoadState& state() {
  static const LoadState s = load_nvrtc();
  return s;
}

}  // namespace

bool nvrtc_takes_minimal(const std::string& version) {
  int major = 0, minor = 0;
  if (std::sscanf(version.c_str(), "%d.%d", &major, &minor) != 2) return false;
  return major > 12 || (major == 12 && minor >= 4);
}

bool forked_after_nvrtc() { return forked_after_nvrtc_flag().load(); }

const NvrtcApi* try_nvrtc(std::string* why_not) {
  const LoadState& s = state();
  if (!s.error.empty()) {
    if (why_not) *why_not = s.error;
    return nullptr;
  }
  return &s.api;
}

const NvrtcApi& nvrtc() {
  std::string why;
  const NvrtcApi* api = try_nvrtc(&why);
  if (!api) throw Error(Status::no_compiler, "nvrtc", why);
  return *api;
}

}  // namespace ktune::detail
