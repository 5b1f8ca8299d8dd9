// The calling thread's CUDA context and what a launch needs to know about its device, without the driver table.
#pragma once

#include "ktune/arch.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune::internal {

// The current context's identity, or nullptr when none is current: unique to that context for the life of the
// process (a destroyed context's handle value may come back for the next context, its identity never does), so
// it is what per-context memos key on. An opaque value, not a CUcontext. Two driver calls; a current context the
// driver no longer knows (destroyed, or a primary context reset) throws Error(cuda_error) with its reason.
void* current_context();

struct DeviceFacts {
  Arch arch;
  DeviceLimits limits;
  int ordinal = -1;
};

// The facts of the device of `ctx`, the identity of the calling thread's current context (current_context()),
// queried once per device and cached for the process. A null `ctx` throws Error(cuda_error) from `family` saying
// how to make a context current.
const DeviceFacts& device_facts(void* ctx, const char* family);

// current_context(), or that Error when none is current.
inline void* require_context(const char* family) {
  void* ctx = current_context();
  if (!ctx) device_facts(nullptr, family);
  return ctx;
}

}  // namespace ktune::internal
