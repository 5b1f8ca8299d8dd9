// The exact mxfp4_gemm reference shared by the GPU tests (tests/mxfp4) and the host tests (tests/host):
// random canonical weights decoded exactly (common/mxfp4.h) and prepacked, random 16-bit activations and bias,
// and a checker that recomputes C in fp64 from fp32 products (exact: a 16-bit value times a scaled e2m1).
//
// Tolerance per element: |out - ref| <= 2^-7 |ref| + 2^-16 sum_k |a w| (output rounding + accumulation order);
// a NaN-scale column must be NaN; every other element of every row in [0, m) must be written (no poison left).
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "mxfp4_gemm/spec.hpp"

namespace ktune::test {

struct Mxfp4TestWeight {
  int n = 0, k = 0, e = 1;
  std::vector<uint8_t> w, s;                  // canonical [e, n, k/2] and [e, n, k/32]
  std::vector<float> dec;                     // [e, n, k] exact decoded values (NaN where the scale is 0xFF)
  std::vector<uint8_t> packed, packed_scales; // mxfp4::prepack_host of w, s (16-byte aligned storage)
};

// The e8m0 scale bytes of a test weight: uniform in [lo, hi]; each byte is replaced, with probability `outliers`,
// by one in [129, 132] (2^2..2^5). The default 2^-7..2^5 puts a scale > 1 in nearly every 64-wide chunk;
// kModelScales (2^-10..2^0, where trained weights sit) in none, so the few-token kernels take their folded path
// (kernel.cuh kFold) everywhere; kMixedScales sends about one chunk in five down the other path.
struct Mxfp4Scales {
  int lo = 120, hi = 132;
  double outliers = 0;
};
inline constexpr Mxfp4Scales kModelScales{117, 127, 0};
inline constexpr Mxfp4Scales kMixedScales{117, 127, 0.002};

// Random e2m1 codes and scales; scale (nan_row, nan_block) of every expert set to 0xFF if >= 0.
Mxfp4TestWeight make_mxfp4_weight(int n, int k, int e, std::mt19937_64& rng, int nan_row = -1, int nan_block = -1,
                                  Mxfp4Scales scales = {});

// count random 16-bit values of dtype t, N(0, sigma^2), never zero.
std::vector<uint16_t> random_16bit(size_t count, ::ktune_common::DType t, float sigma, std::mt19937_64& rng);

// The activations as the native ".mx" kernel (sm_120a) sees them: each 32-block of a row quantized to MXFP8
// (e8m0 scale common/mxfp4.h mxfp8_scale_byte of the block's amax, elements RNE to e4m3) and dequantized. The
// result is exact in dtype t for N(0, 1) data; throws if a value is not (the check would be meaningless).
std::vector<uint16_t> mxfp8_roundtrip(const std::vector<uint16_t>& a, int rows, int k, int lda,
                                      ::ktune_common::DType t);

// Grouped row counts: uneven, with empty experts (random); off[E] is the row count.
std::vector<int> mxfp4_random_offsets(int experts, int total_hint, std::mt19937_64& rng);

// Rows to check: all when m <= 16, else 16 (first and last included).
std::vector<int> mxfp4_rows_to_check(int m, std::mt19937_64& rng);

struct Mxfp4Check {
  double rel = 0;
  int64_t bad = 0, unwritten = 0, checked = 0;
  std::string first_bad;
};

// Checks C [m, ldc] (out dtype) of one call. offsets: grouped offsets (host copy), empty for dense; bias null or
// [E, n]; nan_col: the output column expected NaN (-1: none).
Mxfp4Check mxfp4_check(const mxfp4::Problem& p, const Mxfp4TestWeight& W, const std::vector<uint16_t>& a, int lda,
                       const uint16_t* bias, const std::vector<uint16_t>& c, int ldc, int m,
                       const std::vector<int>& offsets, int nan_col, const std::vector<int>& rows);

}  // namespace ktune::test
