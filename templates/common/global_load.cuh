// Register loads from global memory that stay where the source puts them (device only).
//
// A plain __ldg may be sunk by the compiler towards its first use to save registers, which turns a load
// issued D iterations ahead into one issued just before it is needed: the prefetch silently disappears. These
// are `asm volatile`, so they keep their order against the other volatile asm (mma, ldmatrix, cp.async) and
// are issued where written. Predicated: when `ok` is false nothing is read and the destination keeps the
// value the caller put there (zero-fill by initializing it).
#pragma once
#include "common/dtype.h"

#if defined(__CUDACC__)
namespace ktune_common {

// 16 bytes, read-only path, not kept in L1 (data streamed exactly once, such as a weight).
KT_DEV void ld_stream_v4(uint4& v, const void* p, bool ok) {
  asm volatile(
      "{ .reg .pred q; setp.ne.b32 q, %5, 0; @q ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4]; }"
      : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
      : "l"(p), "r"(int(ok)));
}

// 4 bytes, read-only path, cached in L1 (data many warps of the SM read: activations, scales).
KT_DEV void ld_cached_u32(unsigned& v, const void* p, bool ok) {
  asm volatile("{ .reg .pred q; setp.ne.b32 q, %2, 0; @q ld.global.nc.u32 %0, [%1]; }" : "+r"(v) : "l"(p), "r"(int(ok)));
}

// 16 bytes from shared memory at `addr` (a shared-window address), issued where written like the loads above.
KT_DEV uint4 ld_shared_v4(unsigned addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr));
  return v;
}

}  // namespace ktune_common
#endif
