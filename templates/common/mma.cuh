// Tensor-core and shared-memory fragment helpers (inline PTX, sm_80+; device only).
#pragma once
#include "common/dtype.h"
#include "common/numerics.cuh"

#if defined(__CUDACC__)
namespace ktune_common {

KT_DEV unsigned smem_u32(const void* p) {
  unsigned r;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(r) : "l"(p));
  return r;
}

// The A fragment of 16 K columns from two m16n8 fp32 accumulator blocks of the same 16 rows, c[0..3] (columns
// 0-7) and c[4..7] (columns 8-15), rounded to 16 bits (kBF16: bf16, else f16). The accumulator layout is the A
// layout, for mma_16816 as for a wgmma register operand (per warp, its 16 rows): P V takes P straight from the
// registers of S = Q K^T.
template <bool kBF16>
KT_DEV void acc_to_a_frag(unsigned (&a)[4], const float* c) {
  a[0] = pack_x2<kBF16>(c[0], c[1]);
  a[1] = pack_x2<kBF16>(c[2], c[3]);
  a[2] = pack_x2<kBF16>(c[4], c[5]);
  a[3] = pack_x2<kBF16>(c[6], c[7]);
}

// D = A(16x16, row) * B(16x8, col) + D, fp32 accumulate. A: 4 regs, B: 2 regs of packed 16-bit pairs.
template <bool kBF16>
KT_DEV void mma_16816(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
  if constexpr (kBF16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// Native block-scaled MMA (sm_120a; PTX kind::mxf8f6f4, scale_vec::1X): D(16x8) += (A * 2^(sa-127))(16x32, e2m1)
// * (B * 2^(sb-127))(32x8, e4m3), fp32 accumulate; one ue8m0 scale per A row and per B column for the whole
// k32. Fragments as m16n8k32 fp8: a0/a2 row lane/4, a1/a3 row lane/4 + 8, k 4(lane%4) + byte (+16 for a2/a3);
// b0/b1 column lane/4, same k. Each e2m1 sits in its own byte (the f8f6f4 container: code in bits 5..2).
// Scales (thread-id 0): lane 4r gives row r's byte kBidA of sa, lane 4r + 1 row r + 8's; lane 4c gives column
// c's byte 0 of sb. Only ptxas for sm_120a accepts it; it has not run here (no sm_120 device).
template <int kBidA>
KT_DEV void mma_mx_e2m1_e4m3(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1, unsigned sa,
                             unsigned sb) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.kind::mxf8f6f4.block_scale.scale_vec::1X.f32.e2m1.e4m3.f32.ue8m0 "
      "{%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3}, %10, {%12, 0}, %11, {0, 0};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1), "r"(sa), "r"(sb), "n"(kBidA));
}

// Four 8x8 b16 matrices; lane l gives the row address of matrix l/8, row l%8.
KT_DEV void ldmatrix_x4(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
KT_DEV void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// The inverse of ldmatrix_x4 (sm_90): register i of every lane (lane l: row l/4, columns 2 (l%4), + 1 of matrix
// i, the mma accumulator layout) to the four matrices, lane l giving the row address of matrix l/8, row l%8.
KT_DEV void stmatrix_x4(const unsigned (&r)[4], unsigned addr) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};" ::"r"(addr), "r"(r[0]), "r"(r[1]),
               "r"(r[2]), "r"(r[3])
               : "memory");
#endif
}

}  // namespace ktune_common
#endif
