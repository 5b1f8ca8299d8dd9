// Hopper warpgroup MMA (wgmma) helpers, sm_90a only: every body compiles to nothing elsewhere, and callers
// guard their use with a Spec flag that the host spec sets for sm_90a alone.
//   wg_fence / wg_commit / wg_wait<N>: wgmma.fence, commit_group, wait_group N (N groups may stay in flight).
//   wg_hold(d): after a wait, pins the accumulators' reads below it.
//   fence_proxy_async: generic-proxy shared-memory writes (st.shared, cp.async) made visible to wgmma.
//   wg_desc_k128: descriptor of a K-major 16-bit operand in the 128-byte-swizzle layout (rows of 64 elements =
//     128 bytes, 8-row atoms of 1024 bytes, 16-byte chunk c of row r at chunk c ^ (r % 8)); the k16 step s of a
//     64-wide tile starts s * 32 bytes in. The tile must be 1024-byte aligned.
//   wg_desc_mn: descriptor of an MN-major 16-bit operand (N contiguous) in the same physical layout: rows are
//     the K index (128 bytes = 64 N elements each), `lbo` bytes between 64-element blocks along N, `sbo` bytes
//     between 8-row groups along K.
//   wgmma_ss<N, kBF, kTransB, kTransA>: D(64 x N, fp32) (+)= A * B; A (64 x 16, smem) K-major or, with kTransA,
//     (16 x 64) MN-major; B (N x 16) K-major or, with kTransB, (16 x N) MN-major; operands bf16 (kBF) or fp16;
//     `accumulate` = 0 overwrites D.
//   wgmma_rs<N, kBF, kTransB>: the same with A in registers, held per warp like the m16n8k16 A fragment of its
//     16 rows.
//   D is held per warp like m16n8 accumulators, per 8-column group j: d[4j + {0,1}] = (row g, columns
//   8j + 2 t4 + {0,1}), d[4j + {2,3}] = (row g + 8, same columns), g = lane / 4, t4 = lane % 4, rows counted
//   from 16 * (warp % 4). N is 8, 16 or a multiple of 32 up to 256 (kWgmmaN).
#pragma once
#include "common/dtype.h"

namespace ktune_common {

// The N of the wgmma shapes below: a kernel whose tile rows are known only at run time picks the smallest one
// that covers them (mxfp4_gemm).
template <int N>
constexpr bool kWgmmaN = N == 8 || N == 16 || (N % 32 == 0 && N >= 32 && N <= 256);

KT_DEV void wg_fence() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#endif
}
KT_DEV void wg_commit() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
#endif
}
template <int N>
KT_DEV void wg_wait() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
#endif
}
// After wg_wait: keeps the compiler from moving reads of the accumulators d above the wait (an asm statement
// that does not name them).
template <int N>
KT_DEV void wg_hold(float (&d)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(d[i])::"memory");
}
KT_DEV void fence_proxy_async() {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
KT_DEV unsigned long long wg_desc_k128(unsigned smem_addr) {
  return (unsigned long long)((smem_addr & 0x3FFFF) >> 4) | (1ull << 16) | ((unsigned long long)(1024 >> 4) << 32) |
         (1ull << 62);
}
KT_DEV unsigned long long wg_desc_mn(unsigned addr, unsigned lbo, unsigned sbo) {
  return (unsigned long long)((addr & 0x3FFFF) >> 4) | ((unsigned long long)(lbo >> 4) << 16) |
         ((unsigned long long)(sbo >> 4) << 32) | (1ull << 62);
}

// Operand lists of the wgmma asm statements: the accumulators d[0..n-1] and their placeholders.
#define KT_WG_D4(b) "+f"(d[b]), "+f"(d[b + 1]), "+f"(d[b + 2]), "+f"(d[b + 3])
#define KT_WG_D8(b) KT_WG_D4(b), KT_WG_D4(b + 4)
#define KT_WG_D16(b) KT_WG_D8(b), KT_WG_D8(b + 8)
#define KT_WG_D32(b) KT_WG_D16(b), KT_WG_D16(b + 16)
#define KT_WG_D64(b) KT_WG_D32(b), KT_WG_D32(b + 32)
#define KT_WG_D128(b) KT_WG_D64(b), KT_WG_D64(b + 64)
#define KT_WG_D48(b) KT_WG_D32(b), KT_WG_D16(b + 32)
#define KT_WG_D80(b) KT_WG_D64(b), KT_WG_D16(b + 64)
#define KT_WG_D96(b) KT_WG_D64(b), KT_WG_D32(b + 64)
#define KT_WG_D112(b) KT_WG_D96(b), KT_WG_D16(b + 96)
#define KT_WG_REGS_8 "{%0,%1,%2,%3}"
#define KT_WG_REGS_16 "{%0,%1,%2,%3,%4,%5,%6,%7}"
#define KT_WG_REGS_32 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15}"
#define KT_WG_REGS_64 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31}"
#define KT_WG_REGS_128 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63}"
#define KT_WG_REGS_96 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47}"
#define KT_WG_REGS_160 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79}"
#define KT_WG_REGS_192 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95}"
#define KT_WG_REGS_224 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111}"
#define KT_WG_REGS_256 "{%0,%1,%2,%3,%4,%5,%6,%7,%8,%9,%10,%11,%12,%13,%14,%15,%16,%17,%18,%19,%20,%21,%22,%23,%24,%25,%26,%27,%28,%29,%30,%31,%32,%33,%34,%35,%36,%37,%38,%39,%40,%41,%42,%43,%44,%45,%46,%47,%48,%49,%50,%51,%52,%53,%54,%55,%56,%57,%58,%59,%60,%61,%62,%63,%64,%65,%66,%67,%68,%69,%70,%71,%72,%73,%74,%75,%76,%77,%78,%79,%80,%81,%82,%83,%84,%85,%86,%87,%88,%89,%90,%91,%92,%93,%94,%95,%96,%97,%98,%99,%100,%101,%102,%103,%104,%105,%106,%107,%108,%109,%110,%111,%112,%113,%114,%115,%116,%117,%118,%119,%120,%121,%122,%123,%124,%125,%126,%127}"
// IA, IB, IP, IT: the placeholders of da, db, accumulate and kTransB (they follow the N / 2 accumulators); TA:
// the literal transpose flag of A.
#define KT_WGMMA_SS(SHAPE, TY, TA, REGS, IA, IB, IP, IT, ...)                                                    \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IP ", 0;\nwgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY \
               " " REGS ", %" IA ", %" IB ", p, 1, 1, " TA ", %" IT ";\n}"                                      \
               : __VA_ARGS__                                                                                    \
               : "l"(da), "l"(db), "r"(accumulate), "n"(int(kTransB)))
// A4: the four A registers' placeholders; IB, IP, IT as above.
#define KT_WGMMA_RS(SHAPE, TY, REGS, A4, IB, IP, IT, ...)                                                        \
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %" IP ", 0;\nwgmma.mma_async.sync.aligned." SHAPE ".f32." TY "." TY \
               " " REGS ", " A4 ", %" IB ", p, 1, 1, %" IT ";\n}"                                              \
               : __VA_ARGS__                                                                                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate), "n"(int(kTransB)))

// One row per N: shape, accumulator placeholders, the SS form's da/db/accumulate/kTransB placeholders, the RS
// form's A registers and db/accumulate/kTransB placeholders, the accumulator operands.
#define KT_WG_SHAPES(X)                                                                                                         \
  X(8, "m64n8k16", KT_WG_REGS_8, "4", "5", "6", "7", "{%4,%5,%6,%7}", "8", "9", "10", KT_WG_D4(0))                              \
  X(16, "m64n16k16", KT_WG_REGS_16, "8", "9", "10", "11", "{%8,%9,%10,%11}", "12", "13", "14", KT_WG_D8(0))                     \
  X(32, "m64n32k16", KT_WG_REGS_32, "16", "17", "18", "19", "{%16,%17,%18,%19}", "20", "21", "22", KT_WG_D16(0))                \
  X(64, "m64n64k16", KT_WG_REGS_64, "32", "33", "34", "35", "{%32,%33,%34,%35}", "36", "37", "38", KT_WG_D32(0))                \
  X(96, "m64n96k16", KT_WG_REGS_96, "48", "49", "50", "51", "{%48,%49,%50,%51}", "52", "53", "54", KT_WG_D48(0))                \
  X(128, "m64n128k16", KT_WG_REGS_128, "64", "65", "66", "67", "{%64,%65,%66,%67}", "68", "69", "70", KT_WG_D64(0))             \
  X(160, "m64n160k16", KT_WG_REGS_160, "80", "81", "82", "83", "{%80,%81,%82,%83}", "84", "85", "86", KT_WG_D80(0))             \
  X(192, "m64n192k16", KT_WG_REGS_192, "96", "97", "98", "99", "{%96,%97,%98,%99}", "100", "101", "102", KT_WG_D96(0))          \
  X(224, "m64n224k16", KT_WG_REGS_224, "112", "113", "114", "115", "{%112,%113,%114,%115}", "116", "117", "118", KT_WG_D112(0)) \
  X(256, "m64n256k16", KT_WG_REGS_256, "128", "129", "130", "131", "{%128,%129,%130,%131}", "132", "133", "134", KT_WG_D128(0))

#define KT_WG_SS_CASE(NN, SHAPE, REGS, IA, IB, IP, IT, A4, JB, JP, JT, ...)                         \
  if constexpr (N == NN) {                                                                          \
    if constexpr (kBF && kTransA) KT_WGMMA_SS(SHAPE, "bf16", "1", REGS, IA, IB, IP, IT, __VA_ARGS__); \
    else if constexpr (kBF) KT_WGMMA_SS(SHAPE, "bf16", "0", REGS, IA, IB, IP, IT, __VA_ARGS__);       \
    else if constexpr (kTransA) KT_WGMMA_SS(SHAPE, "f16", "1", REGS, IA, IB, IP, IT, __VA_ARGS__);    \
    else KT_WGMMA_SS(SHAPE, "f16", "0", REGS, IA, IB, IP, IT, __VA_ARGS__);                           \
  }
#define KT_WG_RS_CASE(NN, SHAPE, REGS, IA, IB, IP, IT, A4, JB, JP, JT, ...)           \
  if constexpr (N == NN) {                                                            \
    if constexpr (kBF) KT_WGMMA_RS(SHAPE, "bf16", REGS, A4, JB, JP, JT, __VA_ARGS__); \
    else KT_WGMMA_RS(SHAPE, "f16", REGS, A4, JB, JP, JT, __VA_ARGS__);                \
  }

template <int N, bool kBF, bool kTransB, bool kTransA = false>
KT_DEV void wgmma_ss(float* d, unsigned long long da, unsigned long long db, int accumulate) {
  static_assert(kWgmmaN<N>, "wgmma N: 8, 16, or a multiple of 32 up to 256");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  KT_WG_SHAPES(KT_WG_SS_CASE)
#endif
}

template <int N, bool kBF, bool kTransB>
KT_DEV void wgmma_rs(float* d, const unsigned (&a)[4], unsigned long long db, int accumulate) {
  static_assert(kWgmmaN<N>, "wgmma N: 8, 16, or a multiple of 32 up to 256");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  KT_WG_SHAPES(KT_WG_RS_CASE)
#endif
}

#undef KT_WG_RS_CASE
#undef KT_WG_SS_CASE
#undef KT_WG_SHAPES
#undef KT_WGMMA_RS
#undef KT_WGMMA_SS
#undef KT_WG_REGS_8
#undef KT_WG_REGS_16
#undef KT_WG_REGS_32
#undef KT_WG_REGS_64
#undef KT_WG_REGS_128
#undef KT_WG_REGS_256
#undef KT_WG_REGS_96
#undef KT_WG_REGS_160
#undef KT_WG_REGS_192
#undef KT_WG_REGS_224
#undef KT_WG_D48
#undef KT_WG_D80
#undef KT_WG_D96
#undef KT_WG_D112
#undef KT_WG_D128
#undef KT_WG_D64
#undef KT_WG_D32
#undef KT_WG_D16
#undef KT_WG_D8
#undef KT_WG_D4

}  // namespace ktune_common
