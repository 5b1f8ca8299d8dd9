// GPU test support: skip cleanly without a GPU (a failure under KTUNE_TEST_REQUIRE=gpu: support/skip.hpp);
#pragma once

#include <catch2/catch.hpp>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "driver_api.hpp"
#include "ktune/runtime.hpp"
#include "support/skip.hpp"

namespace ktune::test {

// True when a driver and at least one device exist; makes device 0's primary context current.
inline bool gpu_ready(std::string* why) {
  const detail::DriverApi* cu = detail::try_driver(why);
  if (!cu) return false;
  int n = 0;
  if (cu->cuDeviceGetCount(&n) != CUDA_SUCCESS || n == 0) {
    *why = "driver loaded but no CUDA device";
    return false;
  }
  use_device(0);
  return true;
}

#define KTUNE_REQUIRE_GPU()                                                              \
  do {                                                                                   \
    std::string why_no_gpu;                                                              \
    const bool have_gpu = ::ktune::test::gpu_ready(&why_no_gpu);                         \
    KTUNE_GATE("gpu", have_gpu, "no GPU here (" << why_no_gpu << ")");                    \
  } while (0)

#define CU_CHECK(call) ::ktune::detail::check_cu((call), #call)

// Driver entry points only tests call (the runtime never creates, destroys or resets a context), resolved from
// the libcuda the runtime loaded. Names go through cuda.h's versioned aliases (cuCtxCreate -> cuCtxCreate_v4),
// as the runtime's table does.
struct ContextLifecycle {
  decltype(&::cuCtxCreate) create = nullptr;
  decltype(&::cuCtxDestroy) destroy = nullptr;
  decltype(&::cuDevicePrimaryCtxReset) primary_reset = nullptr;
};

#define KTUNE_TEST_STR2(x) #x
#define KTUNE_TEST_STR(x) KTUNE_TEST_STR2(x)
inline const ContextLifecycle& context_lifecycle() {
  static const ContextLifecycle calls = [] {
    ContextLifecycle c;
    void* lib = dlopen(detail::driver().library_path.c_str(), RTLD_NOW | RTLD_NOLOAD);
    REQUIRE(lib != nullptr);
    c.create = reinterpret_cast<decltype(c.create)>(dlsym(lib, KTUNE_TEST_STR(cuCtxCreate)));
    c.destroy = reinterpret_cast<decltype(c.destroy)>(dlsym(lib, KTUNE_TEST_STR(cuCtxDestroy)));
    c.primary_reset = reinterpret_cast<decltype(c.primary_reset)>(dlsym(lib, KTUNE_TEST_STR(cuDevicePrimaryCtxReset)));
    REQUIRE(c.create);
    REQUIRE(c.destroy);
    REQUIRE(c.primary_reset);
    return c;
  }();
  return calls;
}
#undef KTUNE_TEST_STR
#undef KTUNE_TEST_STR2

class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    CU_CHECK(detail::driver().cuMemAlloc(&ptr_, bytes ? bytes : 1));
  }
  ~DeviceBuffer() {
    if (ptr_) detail::driver().cuMemFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) { o.ptr_ = 0; }

  template <class T>
  T* as() const { return reinterpret_cast<T*>(static_cast<uintptr_t>(ptr_)); }
  CUdeviceptr get() const { return ptr_; }
  size_t bytes() const { return bytes_; }

  void upload(const void* src, size_t n) { CU_CHECK(detail::driver().cuMemcpyHtoD(ptr_, src, n)); }
  template <class T>
  void upload(const std::vector<T>& v) { upload(v.data(), v.size() * sizeof(T)); }
  template <class T>
  std::vector<T> download(size_t count) const {
    std::vector<T> out(count);
    CU_CHECK(detail::driver().cuMemcpyDtoH(out.data(), ptr_, count * sizeof(T)));
    return out;
  }
  // Fills with a byte pattern so unwritten outputs are caught (0xFF.. is NaN for fp16/bf16/fp32).
  void poison(uint8_t byte = 0xFF) { CU_CHECK(detail::driver().cuMemsetD8(ptr_, byte, bytes_)); }

 private:
  CUdeviceptr ptr_ = 0;
  size_t bytes_;
};

inline void sync() { CU_CHECK(detail::driver().cuCtxSynchronize()); }

// KTUNE_TEST_SHARD=i/n: a matrix test runs only its cases with index % n == i, so a slow tool
// (compute-sanitizer racecheck) can cover a whole matrix in n processes side by side. Unset (or malformed,
// which is reported once): every case runs.
inline bool in_test_shard(size_t case_index) {
  static const std::pair<size_t, size_t> shard = [] {
    const char* s = std::getenv("KTUNE_TEST_SHARD");
    unsigned long i = 0, n = 0;
    if (!s) return std::pair<size_t, size_t>{0, 1};
    if (std::sscanf(s, "%lu/%lu", &i, &n) != 2 || n == 0 || i >= n) {
      std::fprintf(stderr, "KTUNE_TEST_SHARD='%s' ignored: expected i/n with 0 <= i < n\n", s);
      return std::pair<size_t, size_t>{0, 1};
    }
    std::fprintf(stderr, "KTUNE_TEST_SHARD: running cases %lu mod %lu\n", i, n);
    return std::pair<size_t, size_t>{i, n};
  }();
  return case_index % shard.second == shard.first;
}

// KTUNE_TEST_MATCH=TEXT: a matrix test runs only its cases whose key "<case name> <config key>" contains TEXT
// (the config the case runs: the default where it forces none), so ".wg" or "g64.ws" selects every case of one
// kernel path, e.g. under a sanitizer. Unset: every case runs.
inline bool in_test_match(const std::string& case_name, const std::string& config_key) {
  static const char* m = [] {
    const char* s = std::getenv("KTUNE_TEST_MATCH");
    if (s) std::fprintf(stderr, "KTUNE_TEST_MATCH: running the cases whose key contains '%s'\n", s);
    return s;
  }();
  return m == nullptr || (case_name + " " + config_key).find(m) != std::string::npos;
}

}  // namespace ktune::test
