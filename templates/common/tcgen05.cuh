// Fifth-generation tensor core (tcgen05, sm_100a) helpers: tensor-memory allocation, the block-scaled MMA from
// shared memory, scale-factor copies, accumulator loads, completion on an mbarrier. Every body compiles to
// nothing except on sm_100a (callers guard their use with a Spec flag the host spec sets for sm_100a alone).
// Compiled in CI for sm_100a; never run here (no sm_100 device was available).
//
// Tensor memory (TMEM): 128 lanes x 512 columns of 32 bits per SM; an address is lane << 16 | column. Warp w of a
// CTA may load or store only lanes 32 (w % 4) .. 32 (w % 4) + 31. For an M = 128 MMA with cta_group::1, row i of
// the accumulator D is lane i and column j of D is column d_col + j.
//
// Shared-memory matrix descriptor (64 bits; the operand tiles and the scale-factor staging): start address >> 4
// (bits 0..13), leading-dimension byte offset >> 4 (16..29), stride-dimension byte offset >> 4 (32..45), the
// fixed value 1 at bits 46..48, base offset 0, swizzle 0 (none: bits 61..63). For a K-major operand without
// swizzle the tile is made of core matrices of 8 rows x 16 bytes (128 contiguous bytes): LBO is the distance
// between core matrices next to each other along K, SBO between the next 8-row groups.
//
// Instruction descriptor for kind::mxf8f6f4 with block scaling (32 bits): B scale-factor byte id at bits 4..5,
// A type at 7..9 and B type at 10..12 (e4m3 = 0, e2m1 = 5), transpose bits 15/16 zero (both K-major), N >> 3 at
// 17..22, bit 23 = 1 (ue8m0 scales), M >> 7 at 27..28, A scale-factor byte id at 29..30.
//
// Sources of these encodings: the PTX ISA's tcgen05 chapter (instruction and shared-memory descriptors, TMEM
// data-path layouts) and public sm_100 kernels that run; see docs/mxfp4_gemm.md (".tc").
#pragma once
#include "common/dtype.h"

namespace ktune_common {

// The two descriptor encoders are host-and-device (the CPU model test decodes what they encode).
KT_HD constexpr unsigned long long tc_smem_desc(unsigned saddr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | ((unsigned long long)((lbo >> 4) & 0x3FFFu) << 16) |
         ((unsigned long long)((sbo >> 4) & 0x3FFFu) << 32) | (1ull << 46);
}

// e4m3 x e4m3 (kind::mxf8f6f4), M = 128, N = n (multiple of 8, 8..256), ue8m0 scales, scale bytes sfa_id / sfb_id
// of the scale-factor words.
KT_HD constexpr unsigned tc_idesc_e4m3(int n, int sfa_id, int sfb_id) {
  return (unsigned(sfb_id & 3) << 4) | (unsigned(n >> 3) << 17) | (1u << 23) | (unsigned(128 >> 7) << 27) |
         (unsigned(sfa_id & 3) << 29);
}

}  // namespace ktune_common

#if defined(__CUDACC__)
namespace ktune_common {

#if defined(__CUDA_ARCH_FEAT_SM100_ALL)
#define KT_TCGEN05 1
#else
#define KT_TCGEN05 0
#endif

// One warp (all 32 lanes) allocates `cols` TMEM columns (a power of two, 32..512); the address lands in shared
// memory at `slot`. The CTA then promises not to allocate again, so a waiting CTA on the SM may proceed.
KT_DEV void tc_alloc(unsigned slot, unsigned cols) {
#if KT_TCGEN05
  asm volatile("tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%0], %1;" ::"r"(slot), "r"(cols) : "memory");
  asm volatile("tcgen05.relinquish_alloc_permit.cta_group::1.sync.aligned;" ::: "memory");
#endif
}
KT_DEV void tc_dealloc(unsigned taddr, unsigned cols) {
#if KT_TCGEN05
  asm volatile("tcgen05.dealloc.cta_group::1.sync.aligned.b32 %0, %1;" ::"r"(taddr), "r"(cols) : "memory");
#endif
}

// Order tcgen05 operations against a CTA barrier: before_ on the signalling side, after_ on the waiting side.
KT_DEV void tc_fence_before() {
#if KT_TCGEN05
  asm volatile("tcgen05.fence::before_thread_sync;" ::: "memory");
#endif
}
KT_DEV void tc_fence_after() {
#if KT_TCGEN05
  asm volatile("tcgen05.fence::after_thread_sync;" ::: "memory");
#endif
}
// Make this thread's generic-proxy shared-memory stores visible to the async proxy (tcgen05.mma / tcgen05.cp).
KT_DEV void fence_proxy_async_smem() {
#if KT_TCGEN05
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}

// 32 rows x 16 bytes of shared memory (descriptor sdesc) into 32 lanes x 4 columns at taddr, the same data in
// each of the four 32-lane quarters: the scale-factor layout the block-scaled MMA reads (row r's word, byte j =
// its scale for the j-th 32-block, in column r / 32, lane r % 32 of every quarter).
KT_DEV void tc_copy_scales(unsigned taddr, unsigned long long sdesc) {
#if KT_TCGEN05
  asm volatile("tcgen05.cp.cta_group::1.32x128b.warpx4 [%0], %1;" ::"r"(taddr), "l"(sdesc) : "memory");
#endif
}

// D[tmem d] (+)= (A * sfa) (B * sfb): A 128 x 32 and B n x 32 e4m3 (K-major descriptors), fp32 D; one thread.
KT_DEV void tc_mma_mx(unsigned d, unsigned long long adesc, unsigned long long bdesc, unsigned idesc, unsigned sfa,
                      unsigned sfb, bool accumulate) {
#if KT_TCGEN05
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "tcgen05.mma.cta_group::1.kind::mxf8f6f4.block_scale.scale_vec::1X [%0], %1, %2, %3, [%4], [%5], p;\n}" ::"r"(d),
      "l"(adesc), "l"(bdesc), "r"(idesc), "r"(sfa), "r"(sfb), "r"(int(accumulate))
      : "memory");
#endif
}

// One arrival on the mbarrier when every tcgen05 operation this thread issued before has completed.
KT_DEV void tc_commit(unsigned bar) {
#if KT_TCGEN05
  asm volatile("tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%0];" ::"r"(bar) : "memory");
#endif
}

// Lanes taddr.lane + 0..31 (thread t: lane + t), columns taddr.col + 0..7 into v; the caller then tc_wait_ld().
KT_DEV void tc_load_8cols(unsigned taddr, float (&v)[8]) {
#if KT_TCGEN05
  unsigned r[8];
  asm volatile("tcgen05.ld.sync.aligned.32x32b.x8.b32 {%0,%1,%2,%3,%4,%5,%6,%7}, [%8];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]), "=r"(r[4]), "=r"(r[5]), "=r"(r[6]), "=r"(r[7])
               : "r"(taddr)
               : "memory");
  asm volatile("tcgen05.wait::ld.sync.aligned;" ::: "memory");
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = __uint_as_float(r[i]);
#else
  (void)taddr;
#pragma unroll
  for (int i = 0; i < 8; ++i) v[i] = 0.f;
#endif
}

}  // namespace ktune_common
#endif
