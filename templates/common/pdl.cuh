// Programmatic dependent launch (sm_90+). A kernel launched with the programmatic-stream-serialization attribute
// may start while the kernel before it on the stream is still running, so every entry point that can be
// launched that way calls pdl_wait() before its first global-memory access: it returns once the preceding grid
// has completed and its writes are visible (and at once when the launch had no such attribute or the arch has
// no griddepcontrol). pdl_launch_dependents() lets the next kernel on the stream be scheduled early, into SMs
// this grid frees; where it is called changes only scheduling, never what the dependent reads, since the
// dependent's own pdl_wait() still waits for this grid to complete.
#pragma once

#include "common/dtype.h"

namespace ktune_common {

KT_DEV void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

KT_DEV void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace ktune_common
