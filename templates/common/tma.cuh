// Tensor-memory-accelerator loads and the transaction mbarriers they complete on (sm_90a only: every body
// compiles to nothing elsewhere; callers guard their use with a Spec flag the host spec sets for sm_90a alone).
// mbar_init and mbar_wait also build for sm_100a, where the tcgen05 MMA path (mxfp4_gemm ".tc") waits on them.
//   mbar_init(bar, count): one phase completes after `count` arrivals and every expected transaction byte.
//   mbar_arrive_expect_tx(bar, bytes): arrive, expecting `bytes` more bytes in the current phase.
//   mbar_wait(bar, parity): spin until the phase with that parity (0 for the first) has completed.
//   tma_load_2d(dst, map, x, y, bar): the box of the CUtensorMap at generic address `map` whose first element is
//     (x innermost, y) into shared memory at dst, completing its bytes on bar. Elements outside the tensor read 0.
//   bulk_load(dst, src, bytes, bar): `bytes` (a multiple of 16, both addresses 16-byte aligned) contiguous bytes
//     of global memory into shared memory at dst, completing on bar; no tensor map.
#pragma once
#include "common/dtype.h"

namespace ktune_common {

KT_DEV void mbar_init(unsigned bar, unsigned count) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM100_ALL)
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
KT_DEV void mbar_arrive_expect_tx(unsigned bar, unsigned bytes) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}" ::"r"(bar), "r"(bytes)
               : "memory");
#endif
}
KT_DEV void mbar_wait(unsigned bar, unsigned parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM100_ALL)
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
#endif
}
KT_DEV void tma_load_2d(unsigned dst, const void* map, int x, int y, unsigned bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(
          dst),
      "l"(reinterpret_cast<unsigned long long>(map)), "r"(x), "r"(y), "r"(bar)
      : "memory");
#endif
}

KT_DEV void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(bar)
               : "memory");
#endif
}

}  // namespace ktune_common
