// cp.async (sm_80+) global -> shared, 16 bytes, L2 only; device only.
#pragma once
#include "common/dtype.h"

#if defined(__CUDACC__)
namespace ktune_common {

// Copies src_bytes (0 or 16) and zero-fills the rest of the 16-byte destination.
KT_DEV void cp_async_16(unsigned dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
KT_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
KT_DEV void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

}  // namespace ktune_common
#endif
