// What the GPU benches share: the driver table, checked calls, `--name value` arguments and filled device buffers.
#pragma once

#include <cstdint>
#include <string>

#include "driver_api.hpp"

namespace ktune::bench {

inline const detail::DriverApi& cu() { return detail::driver(); }
inline void ck(CUresult r, const char* what) { detail::check_cu(r, what); }

// The value after `--name` on the command line, else `fallback`.
inline std::string arg(int argc, char** argv, const std::string& name, const std::string& fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == "--" + name) return argv[i + 1];
  return fallback;
}

// `bytes` of device memory, every byte `fill` (a constant bit pattern: the benches time memory traffic, not values).
inline CUdeviceptr alloc(size_t bytes, unsigned char fill) {
  CUdeviceptr p = 0;
  ck(cu().cuMemAlloc(&p, bytes), "cuMemAlloc");
  ck(cu().cuMemsetD8(p, fill, bytes), "cuMemsetD8");
  return p;
}

template <class T>
T* ptr(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

}  // namespace ktune::bench
