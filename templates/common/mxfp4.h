// OCP MX v1.0 MXFP4 element and scale formats, exact on host and device. Plain C++ (host) / NVRTC device code.
//   e2m1 (4 bits: sign, 2 exponent bits, 1 mantissa bit; bias 1): codes 0..7 = 0, 0.5, 1, 1.5, 2, 3, 4, 6;
//   8..15 are the same magnitudes negated (8 is -0). No Inf/NaN.
//   e8m0 (8 bits, unsigned exponent, bias 127): 2^(e-127); 0xFF is NaN; there is no zero and no Inf.
// A block of 32 consecutive values along K shares one e8m0 scale; two e2m1 codes per byte, low nibble first.
#pragma once
#include "common/dtype.h"
#include "common/numerics.cuh"

namespace ktune_common {

// Exact decode of one e2m1 code (low 4 bits of `code`).
KT_HD float e2m1_to_float(unsigned code) {
  const unsigned c = code & 7u;
  const float mag = c < 2 ? 0.5f * float(c) : float(1u << ((c >> 1) - 1)) * (1.0f + 0.5f * float(c & 1u));
  return (code & 8u) ? -mag : mag;
}

// Exact decode of one e8m0 scale: 2^(e-127) (2^-127 is an fp32 subnormal, still exact); 0xFF -> NaN.
KT_HD float e8m0_to_float(unsigned char e) {
  if (e == 0xFF) return f32_from_bits(0x7FC00000u);
  if (e == 0) return f32_from_bits(0x00400000u);  // 2^-127
  return f32_from_bits(unsigned(e) << 23);
}

// Nearest e2m1 code of a float (ties to the even code), saturating at +-6. Test/data helper.
KT_HD unsigned float_to_e2m1(float v) {
  const float mags[8] = {0.f, 0.5f, 1.f, 1.5f, 2.f, 3.f, 4.f, 6.f};
  const unsigned sign = v < 0.f ? 8u : 0u;
  const float a = v < 0.f ? -v : v;
  unsigned best = 0;
  for (unsigned c = 1; c < 8; ++c) {
    const float d = a - mags[c] < 0.f ? mags[c] - a : a - mags[c];
    const float db = a - mags[best] < 0.f ? mags[best] - a : a - mags[best];
    if (d < db || (d == db && (c & 1u) == 0u)) best = c;
  }
  return sign | best;
}

// MXFP8 (e4m3) activations for the native block-scaled MMA (mxfp4_gemm ".mx", sm_120a): each 32-block of a
// token row shares one e8m0 scale, the smallest power of two that brings the block's largest magnitude to at
// most 448 (the largest finite e4m3), so no element saturates; the elements are then x * 2^(127-e) rounded to
// e4m3 (RNE). From the bits of amax = f * 2^E (1 <= f < 2): amax <= 448 * 2^(e-127) = 1.75 * 2^(e-119) holds for
// e = E + 119 when f <= 1.75, else e = E + 120. Clamped to [0, 247]; amax = 0 gives 127 (any scale works). An
// infinite amax gives 247 (its elements saturate to +-448); subnormal amax clamp at 0 (2^-127).
KT_HD unsigned mxfp8_scale_byte(float amax) {
  const unsigned u = f32_bits(amax) & 0x7FFFFFFFu;
  if (u == 0u) return 127u;
  const int E = int(u >> 23) - 127;  // subnormal amax: E = -127, clamped below anyway
  int e = E + 119 + ((u & 0x7FFFFFu) > 0x600000u ? 1 : 0);
  if (e > 247) e = 247;
  if (e < 0) e = 0;
  return unsigned(e);
}
// 2^(127 - e) for e in [0, 247] (a normal float: exponent field 254 - e in [7, 254]), the factor that takes a
// block's values to its e4m3 grid.
KT_HD float mxfp8_inv_scale(unsigned e) { return f32_from_bits((254u - e) << 23); }

// Four e2m1 codes (the low nibble of each byte of `codes`; high nibbles zero) to the four e4m3 bytes of the same
// values, exactly (every e2m1 value is an e4m3 value): magnitude m >= 2 (exponent 1..3 of e2m1) is e4m3
// 0x30 + 4m (exponent m/2 + 6, mantissa bit (m & 1) << 2), m = 1 (0.5) is 0x30, m = 0 is 0; the sign moves from
// bit 3 to bit 7. Byte-parallel: no shift carries across bytes. For the weight operand of the sm_100a
// tcgen05 MMA (mxfp4_gemm ".tc"), which takes e4m3 from shared memory.
KT_HD unsigned e2m1x4_to_e4m3x4(unsigned codes) {
  const unsigned mag = codes & 0x07070707u;
  const unsigned sign = (codes & 0x08080808u) << 4;
  const unsigned ge2 = ((mag >> 1) | (mag >> 2)) & 0x01010101u;  // 1 in the bytes with m >= 2
  const unsigned big = (mag << 2) + 0x30303030u;
  const unsigned small = (mag & 0x01010101u) * 0x30u;              // m in {0, 1}: 0 or 0x30
  const unsigned sel = ge2 * 0xFFu;
  return (big & sel) | (small & ~sel) | sign;
}

#if defined(__CUDACC__)
// Device decode used by the mxfp4_gemm kernel. A 32-bit word holds 8 codes; output register j (0..3) is the
// 16-bit pair (code j, code j+4) (low half, high half). Each code's 3 magnitude bits are placed at the top of
// the mantissa / bottom of the exponent of a 16-bit float (bf16: bits 8..6; fp16: bits 11..9) and its sign at
// bit 15, which makes the value exactly code * 2^-126 (bf16) / code * 2^-14 (fp16), codes 0/1 as subnormals;
// one fma by 2^126 / 2^14 (subnormals are supported by 16-bit fma) gives the exact e2m1 value.
template <int J, bool kBF16>
KT_DEV unsigned e2m1x2_raw(unsigned w) {
  constexpr int kMagShift = (kBF16 ? 6 : 9) - 4 * J;  // code bits 4J..4J+2 -> 6..8 (bf16) / 9..11 (fp16)
  constexpr int kSignShift = 12 - 4 * J;              // sign bit 4J+3 -> 15
  constexpr unsigned kMagMask = kBF16 ? 0x01C001C0u : 0x0E000E00u;
  const unsigned m = kMagShift >= 0 ? (w << (kMagShift >= 0 ? kMagShift : 0)) : (w >> (kMagShift < 0 ? -kMagShift : 0));
  const unsigned s = w << kSignShift;
  return (m & kMagMask) | (s & 0x80008000u);
}

KT_DEV unsigned bf16x2_fma(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
KT_DEV unsigned f16x2_fma(unsigned a, unsigned b, unsigned c) {
  unsigned d;
  asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}

// e8m0 byte -> bf16 bits of 2^(e-127) (e == 0 -> the bf16 subnormal 2^-127, 0xFF -> NaN), duplicated in both halves.
KT_DEV unsigned e8m0_to_bf16x2(unsigned e) {
  unsigned b = e << 7;
  b = e == 0u ? 0x0040u : b;
  b = e == 0xFFu ? 0x7FC0u : b;
  return b | (b << 16);
}
// e8m0 byte -> fp32 2^(e-127) (e == 0 -> subnormal 2^-127, 0xFF -> NaN).
KT_DEV float e8m0_to_f32(unsigned e) {
  unsigned b = e << 23;
  b = e == 0u ? 0x00400000u : b;
  b = e == 0xFFu ? 0x7FC00000u : b;
  return __uint_as_float(b);
}
#endif

}  // namespace ktune_common
