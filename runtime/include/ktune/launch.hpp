// Typed launch: every argument is passed by value (trivially copyable), CUlaunchConfig is built in one place
// (launch.cpp). No host<->device copy, no sync, no allocation: safe under CUDA graph capture.
#pragma once

#include <type_traits>

#include "ktune/export.hpp"
#include "ktune/kernel_spec.hpp"
#include "ktune/runtime.hpp"

namespace ktune {

// What the compiler gave one entry point (from cuFuncGetAttribute): the tuner prunes candidates that spill.
struct KTUNE_API KernelResources {
  int registers = 0;          // per thread
  int local_bytes = 0;        // per thread: register spills and stack arrays in local memory
  int static_smem_bytes = 0;
  int max_threads_per_block = 0;
};
KTUNE_API KernelResources kernel_resources(const LoadedKernel& kernel, int entry);

// Where and how a launch is enqueued.
struct LaunchStream {
  void* stream = nullptr;  // a CUstream; nullptr = the legacy default stream
  // Programmatic dependent launch (sm_90+): the kernel may be scheduled while the previous kernel on the stream
  // is still running, and its griddepcontrol.wait orders its memory accesses after that kernel's. Only for
  // kernels that call pdl_wait() before their first global access (templates/common/pdl.cuh).
  bool pdl = false;
};

// Launches entry point `entry` of `kernel` on `stream`.
KTUNE_API void launch_raw(const LoadedKernel& kernel, int entry, const LaunchDims& dims, const LaunchStream& stream,
                          void** args);

template <class... Args>
void launch(const LoadedKernel& kernel, int entry, const LaunchDims& dims, const LaunchStream& stream,
            const Args&... args) {
  static_assert((std::is_trivially_copyable_v<Args> && ...), "kernel arguments are copied by value");
  void* ptrs[] = {const_cast<void*>(static_cast<const void*>(&args))..., nullptr};
  launch_raw(kernel, entry, dims, stream, ptrs);
}
template <class... Args>
void launch(const LoadedKernel& kernel, int entry, const LaunchDims& dims, void* stream, const Args&... args) {
  launch(kernel, entry, dims, LaunchStream{stream, false}, args...);
}

}  // namespace ktune
