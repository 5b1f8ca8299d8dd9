// The shared-memory stage of the sm_100a tcgen05 path (".tc", kernel_tc.cuh): its layout and the functions that
// fill it, host-and-device so the CPU tests can build a stage exactly as the kernel does and check it against a
// model of the MMA (tests/mxfp4/test_mxfp4_tc_model.cpp).
//
// One stage covers 128 k (four 32-blocks) of 128 weight rows and kBM tokens:
//   A   128 rows x 128 e4m3 bytes, K-major without swizzle: core matrices of 8 rows x 16 bytes (128 contiguous
//       bytes), K-fastest, so the leading-dimension offset (next 16 k) is 128 and the stride offset (next 8 rows)
//       is 1024; the 32-k slice kk starts 256 kk bytes in.
//   B   kBM token rows in the same layout.
//   SFA / SFB  128 scale words each (row r: byte j = its e8m0 scale of 32-block j), in the order
//       tcgen05.cp.32x128b.warpx4 reads them: 32 rows of 16 bytes, row r % 32 holding rows r % 32, +32, +64, +96.
// Inside each 32-block the k order is the prepacked fragments' (a lane's word holds k 2t, 8+2t, 2t+1, 9+2t of its
// two rows, t = lane % 4, then +16 for the next word): slot 16h + 4t + q holds k 16h + {2t, 8+2t, 2t+1, 9+2t}[q].
// The activations are written in the same order, so every product pairs the right weight and activation.
#pragma once
#include "common/dtype.h"
#include "common/mxfp4.h"
#include "common/numerics.cuh"
#include "mxfp4_gemm/shape.h"  // kTcRows, kTcKStep, kTcSfBytes, tc_stage_bytes

namespace ktune_mxfp4 {

KT_HD constexpr int tc_b_offset() { return kTcRows * kTcKStep; }
KT_HD constexpr int tc_sfa_offset(int bm) { return kTcRows * kTcKStep + bm * kTcKStep; }
KT_HD constexpr int tc_sfb_offset(int bm) { return tc_sfa_offset(bm) + kTcSfBytes; }

// Byte offset of (row, k byte) in an operand tile (A or B).
KT_HD constexpr int tc_operand_off(int row, int kbyte) {
  return (row >> 3) * 1024 + (kbyte >> 4) * 128 + (row & 7) * 16 + (kbyte & 15);
}
// Byte offset of row r's scale word in a scale block.
KT_HD constexpr int tc_scale_off(int r) { return (r & 31) * 16 + (r >> 5) * 4; }

KT_HD void tc_store_u32(unsigned char* p, unsigned v) {
  p[0] = (unsigned char)v;
  p[1] = (unsigned char)(v >> 8);
  p[2] = (unsigned char)(v >> 16);
  p[3] = (unsigned char)(v >> 24);
}

// Weight item it (0 .. 511) of stage ks: lane it % 32 of 16-row tile (it / 32) % 8 in 64-k chunk it / 256; `w` =
// that lane's four prepacked words (zeros past n16 / kc). Word s (k16 step s) holds codes 0, 2, 4, 6 of row
// r0 = 16 tile + lane / 4 and codes 1, 3, 5, 7 of row r0 + 8, all at k bytes 64 chunk + 16 s + 4 (lane % 4).
KT_HD void tc_store_weight(unsigned char* a, int it, const unsigned (&w)[4]) {
  const int lane = it & 31, tile = (it >> 5) & 7, cc = it >> 8;
  const int r0 = tile * 16 + lane / 4, t = lane & 3;
  for (int s = 0; s < 4; ++s) {
    const int kb = 64 * cc + 16 * s + 4 * t;
    const unsigned even = ::ktune_common::e2m1x4_to_e4m3x4(w[s] & 0x0F0F0F0Fu);
    const unsigned odd = ::ktune_common::e2m1x4_to_e4m3x4((w[s] >> 4) & 0x0F0F0F0Fu);
#if defined(__CUDA_ARCH__)
    *reinterpret_cast<unsigned*>(a + tc_operand_off(r0, kb)) = even;
    *reinterpret_cast<unsigned*>(a + tc_operand_off(r0 + 8, kb)) = odd;
#else
    tc_store_u32(a + tc_operand_off(r0, kb), even);
    tc_store_u32(a + tc_operand_off(r0 + 8, kb), odd);
#endif
  }
}

// Weight row n's scale word for stage ks (byte b: 32-block 4 ks + b) from the prepacked scales of one expert
// ([n16][ceil(kc/4)][32 lanes] words: lane l of group g holds, for chunk c = 4g + l % 4, the bytes (row l/4,
// block 2c), (row l/4 + 8, 2c), (l/4, 2c + 1), (l/4 + 8, 2c + 1)). Rows past n16 and blocks past kc: 1.0.
KT_HD unsigned tc_weight_scale_word(const unsigned char* s, int n16, int kc, int n, int ks) {
  const int nt = n >> 4, rr = n & 15, groups = (kc + 3) / 4;
  if (nt >= n16) return 0x7F7F7F7Fu;
  unsigned word = 0u;
  for (int b = 0; b < 4; ++b) {
    const int blk = 4 * ks + b, c = blk >> 1;
    unsigned v = 127u;
    if (c < kc) {
      const int lane = (rr & 7) * 4 + (c & 3), byte = (rr >> 3) + 2 * (blk & 1);
      v = s[((long long)(nt * groups + (c >> 2)) * 32 + lane) * 4 + byte];
    }
    word |= v << (8 * b);
  }
  return word;
}

// Token row j's 32-block b of this stage (x: its 32 values in k order) to MXFP8: the scale byte (the rule of
// common/mxfp4.h mxfp8_scale_byte) goes to its byte of row j's word in the SFB block, the e4m3 elements (RNE)
// to B in the fragment k order.
KT_HD void tc_store_activations(unsigned char* b_tile, unsigned char* sfb, int j, int b, const float (&x)[32]) {
  float amax = 0.f;
  for (int e = 0; e < 32; ++e) {
    const float v = x[e] < 0.f ? -x[e] : x[e];
    amax = v > amax ? v : amax;
  }
  const unsigned sbyte = ::ktune_common::mxfp8_scale_byte(amax);
  const float f = ::ktune_common::mxfp8_inv_scale(sbyte);
  for (int h = 0; h < 2; ++h)
    for (int t = 0; t < 4; ++t) {
      const int q = 16 * h + 2 * t;
#if defined(__CUDA_ARCH__)
      *reinterpret_cast<unsigned*>(b_tile + tc_operand_off(j, 32 * b + 16 * h + 4 * t)) =
          ::ktune_common::pack_e4m3x4(x[q] * f, x[q + 8] * f, x[q + 1] * f, x[q + 9] * f);
#else
      const unsigned v = unsigned(::ktune_common::float_to_e4m3(x[q] * f)) |
                         (unsigned(::ktune_common::float_to_e4m3(x[q + 8] * f)) << 8) |
                         (unsigned(::ktune_common::float_to_e4m3(x[q + 1] * f)) << 16) |
                         (unsigned(::ktune_common::float_to_e4m3(x[q + 9] * f)) << 24);
      tc_store_u32(b_tile + tc_operand_off(j, 32 * b + 16 * h + 4 * t), v);
#endif
    }
  sfb[tc_scale_off(j) + b] = (unsigned char)sbyte;
}

}  // namespace ktune_mxfp4
