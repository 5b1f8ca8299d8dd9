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

// What the calling thread had current when constructed (its CUDA context, none, or the host CPU as its device),
// made current again when destroyed: for a call that switches devices on the caller's behalf (ktune_warmup's
// options.device), so the caller's own context is current again when the call returns or throws.
class CallerDeviceScope {
 public:
  CallerDeviceScope();
  ~CallerDeviceScope();
  CallerDeviceScope(const CallerDeviceScope&) = delete;
  CallerDeviceScope& operator=(const CallerDeviceScope&) = delete;

 private:
  void* context_ = nullptr;  // the CUcontext current at construction (may be none)
  bool host_ = false;        // the thread's device was the host CPU (use_device(kHostDevice))
  bool known_ = false;       // context_ was read (false without a driver: then nothing can switch it)
};

// current_context(), or that Error when none is current.
inline void* require_context(const char* family) {
  void* ctx = current_context();
  if (!ctx) device_facts(nullptr, family);
  return ctx;
}

}  // namespace ktune::internal
