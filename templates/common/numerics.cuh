// Scalar conversions between bf16 / fp16 / fp8 e4m3 (OCP: bias 7, no inf, 0x7F/0xFF NaN, max 448) and float.
// The KT_HD functions are exact (round-to-nearest-even on the way down) and identical on host and device;
// they are the reference semantics. Device-only fast paths below them are used by the kernels.
#pragma once
#include "common/dtype.h"

namespace ktune_common {

KT_HD unsigned f32_bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  union { float f; unsigned u; } c{f};
  return c.u;
#endif
}
KT_HD float f32_from_bits(unsigned u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  union { unsigned u; float f; } c{u};
  return c.f;
#endif
}

KT_HD float bf16_to_float(unsigned short h) { return f32_from_bits(unsigned(h) << 16); }
KT_HD unsigned short float_to_bf16(float f) {
  unsigned u = f32_bits(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (unsigned short)((u >> 16) | 0x40);  // quiet NaN
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

KT_HD float fp16_to_float(unsigned short h) {
  unsigned sign = unsigned(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0x1F) return f32_from_bits(sign | 0x7F800000u | (man << 13));
  if (exp == 0) {  // zero / subnormal: man * 2^-24, exact in float
    float v = float(man) * 5.9604644775390625e-08f;
    return sign ? -v : v;
  }
  return f32_from_bits(sign | ((exp + 112u) << 23) | (man << 13));
}
KT_HD unsigned short float_to_fp16(float f) {
  unsigned u = f32_bits(f), sign = (u >> 16) & 0x8000u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (unsigned short)(sign | 0x7E00u);
  if (a >= 0x477FF000u) return (unsigned short)(sign | 0x7C00u);  // rounds to >= 65520: inf
  if (a < 0x38800000u) {                                           // below 2^-14: subnormal / zero
    if (a < 0x33000000u) return (unsigned short)sign;              // < 2^-25 rounds to 0 (2^-25 ties to 0)
    unsigned e = a >> 23, m = (a & 0x7FFFFFu) | 0x800000u;
    unsigned shift = 126u - e;  // value = m * 2^(e-150); fp16 unit 2^-24 => m >> (126 - e)
    unsigned q = m >> shift, rem = m & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) ++q;
    return (unsigned short)(sign | q);
  }
  unsigned r = a + 0xFFFu + ((a >> 13) & 1u);
  return (unsigned short)(sign | ((r - 0x38000000u) >> 13));
}

KT_HD float e4m3_to_float(unsigned char b) {
  unsigned sign = b & 0x80u, exp = (b >> 3) & 0xFu, man = b & 7u;
  float v;
  if (exp == 0xF && man == 7) return f32_from_bits(0x7FC00000u | (sign << 24));
  if (exp == 0) v = float(man) * 0.001953125f;  // man/8 * 2^-6
  else v = f32_from_bits(((exp + 120u) << 23) | (man << 20));
  return sign ? -v : v;
}
// Round to nearest even, saturate to +-448, NaN -> 0x7F.
KT_HD unsigned char float_to_e4m3(float f) {
  unsigned u = f32_bits(f), sign = (u >> 24) & 0x80u, a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return (unsigned char)0x7F;
  if (a >= 0x43E80000u) return (unsigned char)(sign | 0x7E);  // >= 464 (tie 448/480 region): saturate
  if (a < 0x3C800000u) {                                      // below 2^-6: subnormal grid of 2^-9
    float x = f32_from_bits(a) * 512.0f;                      // exact scaling
    unsigned q = (unsigned)x;
    float rem = x - float(q);
    if (rem > 0.5f || (rem == 0.5f && (q & 1u))) ++q;
    return (unsigned char)(sign | q);  // q == 8 becomes the smallest normal 0x08: correct
  }
  unsigned r = a + 0x7FFFFu + ((a >> 20) & 1u);
  unsigned v = ((r >> 20) - (120u << 3)) & 0xFFu;
  if (v > 0x7E) v = 0x7E;
  return (unsigned char)(sign | v);
}

KT_HD float to_float(int dtype, const void* p, long long i) {
  switch (dtype) {
    case kBF16: return bf16_to_float(static_cast<const unsigned short*>(p)[i]);
    case kFP16: return fp16_to_float(static_cast<const unsigned short*>(p)[i]);
    case kE4M3: return e4m3_to_float(static_cast<const unsigned char*>(p)[i]);
    default: return static_cast<const float*>(p)[i];
  }
}

#if defined(__CUDACC__)
// ---- device fast paths ----
KT_DEV float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
KT_DEV float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
// Two floats -> packed 16-bit pair (lo in bits 0..15).
KT_DEV unsigned pack_bf16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
KT_DEV unsigned pack_f16x2(float lo, float hi) {
  unsigned r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
template <bool kBF16>
KT_DEV unsigned pack_x2(float lo, float hi) {
  return kBF16 ? pack_bf16x2(lo, hi) : pack_f16x2(lo, hi);
}
// Two e4m3 bytes taken from w (byte indices B0 -> lo half, B1 -> hi half) -> f16x2 holding value * 2^-8.
// Exact for every finite e4m3 (subnormals included: they land on fp16 subnormals); the caller folds the
// 2^8 into its scale. Three integer ops, works on every arch (sm_80 has no e4m3 cvt).
template <int B0, int B1>
KT_DEV unsigned e4m3x2_to_f16x2_scaled(unsigned w) {
  unsigned t;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(t) : "r"(w), "r"(0u), "n"(0x0404 | (B0 << 4) | (B1 << 12)));
  return ((t >> 1) & 0x3F803F80u) | (t & 0x80008000u);
}
// Exact e4m3x2 -> f16x2 (no scale); hardware cvt on sm_89+.
KT_DEV unsigned e4m3x2_to_f16x2(unsigned short v) {
#if __CUDA_ARCH__ >= 890
  unsigned r;
  asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(r) : "h"(v));
  return r;
#else
  unsigned t = e4m3x2_to_f16x2_scaled<0, 1>(v);
  unsigned r;
  asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(r) : "r"(t), "r"(0x5C005C00u));  // * 256
  return r;
#endif
}

// Four e4m3 bytes of w -> two f16x2 words, for mma fragments. kInterleaved = false: lo = (byte0, byte1),
// hi = (byte2, byte3); true: lo = (byte0, byte2), hi = (byte1, byte3). The results are exact values times
// 1 / kE4m3Fold: sm_89+ uses the hardware cvt (fold 1), older arches the 3-op bit trick (fold 2^8); callers
// multiply their scales by kE4m3Fold.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
constexpr float kE4m3Fold = 1.f;
#else
constexpr float kE4m3Fold = 256.f;
#endif
template <bool kInterleaved>
KT_DEV void e4m3x4_to_f16x2x2(unsigned w, unsigned& lo, unsigned& hi) {
#if __CUDA_ARCH__ >= 890
  unsigned x = w;
  if (kInterleaved) asm("prmt.b32 %0, %1, %1, 0x3120;" : "=r"(x) : "r"(w));
  asm("{ .reg .b16 a, b;\n mov.b32 {a, b}, %2;\n cvt.rn.f16x2.e4m3x2 %0, a;\n cvt.rn.f16x2.e4m3x2 %1, b; }"
      : "=r"(lo), "=r"(hi)
      : "r"(x));
#else
  lo = e4m3x2_to_f16x2_scaled<0, kInterleaved ? 2 : 1>(w);
  hi = e4m3x2_to_f16x2_scaled<kInterleaved ? 1 : 2, 3>(w);
#endif
}
// Four floats -> four e4m3 bytes (RNE, satfinite).
KT_DEV unsigned pack_e4m3x4(float a, float b, float c, float d) {
#if __CUDA_ARCH__ >= 890
  unsigned short lo, hi;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(lo) : "f"(b), "f"(a));
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(hi) : "f"(d), "f"(c));
  return unsigned(lo) | (unsigned(hi) << 16);
#else
  return unsigned(float_to_e4m3(a)) | (unsigned(float_to_e4m3(b)) << 8) | (unsigned(float_to_e4m3(c)) << 16) |
         (unsigned(float_to_e4m3(d)) << 24);
#endif
}
#endif  // __CUDACC__

}  // namespace ktune_common
