// Thread-block clusters (sm_90a only: every body compiles to nothing elsewhere; callers guard their use with a
// Spec flag the host spec sets for sm_90a alone). A kernel that uses these is declared with __cluster_dims__, so
// every launch of it forms the clusters.
//   cluster_rank(): this CTA's rank in its cluster.
//   cluster_sync(): every thread of every CTA of the cluster (release / acquire at cluster scope); also what makes
//     one CTA's mbarrier initialisation visible to the others before they signal it.
//   peer_addr(a, rank): the shared::cluster address of offset `a` of this CTA's shared memory in CTA `rank`.
//   mbar_arrive_remote(bar): one arrival, with release at cluster scope, on an mbarrier at a shared::cluster
//     address (another CTA's).
//   mbar_wait_cluster(bar, parity): mbar_wait with acquire at cluster scope, for a phase other CTAs complete.
//   bulk_copy_to_peer(dst, src, bytes, bar): the TMA engine copies `bytes` (multiple of 16, both addresses
//     16-byte aligned) of this CTA's shared memory at src to the shared::cluster address dst, completing them on
//     the mbarrier at the shared::cluster address bar (in the destination CTA).
//   bulk_commit() / bulk_wait_read<N>(): close the thread's bulk copies into a group / wait until at most N of its
//     groups may still read their source.
#pragma once
#include "common/dtype.h"

namespace ktune_common {

KT_DEV unsigned cluster_rank() {
  unsigned r = 0;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
#endif
  return r;
}
KT_DEV void cluster_sync() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory");
#endif
}
KT_DEV unsigned peer_addr(unsigned a, unsigned rank) {
  unsigned r = a;
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
#endif
  return r;
}
KT_DEV void mbar_arrive_remote(unsigned bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(bar) : "memory");
#endif
}
KT_DEV void mbar_wait_cluster(unsigned bar, unsigned parity) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  unsigned done = 0;
  do {
    asm volatile(
        "{\n.reg .pred p;\nmbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2;\n"
        "selp.u32 %0, 1, 0, p;\n}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!done);
#endif
}
KT_DEV void bulk_copy_to_peer(unsigned dst, unsigned src, unsigned bytes, unsigned bar) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile(
      "cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(dst),
      "r"(src), "r"(bytes), "r"(bar)
      : "memory");
#endif
}
KT_DEV void bulk_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
template <int N>
KT_DEV void bulk_wait_read() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("cp.async.bulk.wait_group.read %0;" ::"n"(N) : "memory");
#endif
}

}  // namespace ktune_common
