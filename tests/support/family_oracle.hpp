// The host backend as a second oracle for the sparse_mla_decode and mxfp4_gemm GPU kernels, the way
// tests/support/xqa_oracle.hpp does it for xqa_decode: on the GPU, `[.][mla_oracle_dump]` and
// `[.][mxfp4_oracle_dump]` run the fixed cases below (inputs regenerated from a recorded seed by a portable
// splitmix64 generator) and record the raw output bytes in tests/data/{mla,mxfp4}_h200_oracle.bin (the
// xqa_oracle file format); on any machine with the LLVM host backend, `[host][oracle]` regenerates the inputs,
// runs the host kernel and compares it with the recorded GPU output, and both with the exact reference.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mxfp4_gemm/spec.hpp"
#include "sparse_mla/mla_reference.hpp"
#include "sparse_mla_decode/spec.hpp"

namespace ktune::test {

// FNV-1a over raw bytes, chained: the fixture records it so a changed generator reads as a stale fixture.
uint64_t fnv1a(const void* data, size_t n, uint64_t h = 1469598103934665603ull);

// ---- sparse_mla_decode ----
struct MlaOracleCase {
  std::string name;
  ktune::mla::Problem problem;
  MlaCaseOptions options;  // options.seed is set from the record's seed
};
// One case per numerics path: fp8_ds_mla and bf16 caches, page 64/256, heads 16..128, top-k not a multiple
// of the tile, sinks, MTP (2 positions), random -1s and a token with only -1s.
std::vector<MlaOracleCase> mla_oracle_cases();
MlaCase make_mla_oracle_case(const MlaOracleCase& oc, uint64_t seed);
uint64_t mla_input_digest(const MlaCase& c);

// ---- mxfp4_gemm ----
struct Mxfp4OracleCase {
  std::string name;
  ktune::mxfp4::Problem problem;
  int m = 1;                 // rows of A (grouped: offsets.back())
  bool bias = false;
  std::vector<int> offsets;  // grouped: [E+1] row offsets; empty for dense
  int nan_row = -1, nan_block = -1;  // a 0xFF (NaN) scale at (row, k/32 block) of expert 0
};
struct Mxfp4OracleInputs {
  std::vector<uint16_t> a;      // [m, k] a_dtype bits
  std::vector<uint8_t> w, s;    // canonical w_packed [E, n, k/2], w_scale [E, n, k/32]
  std::vector<uint16_t> bias;   // [E, n] out_dtype bits (always generated; used when the case has bias)
};
// Dense and grouped (uneven and empty experts), bf16 and fp16, N and K tails, bias, a NaN scale.
std::vector<Mxfp4OracleCase> mxfp4_oracle_cases();
Mxfp4OracleInputs make_mxfp4_oracle_inputs(const Mxfp4OracleCase& oc, uint64_t seed);
uint64_t mxfp4_input_digest(const Mxfp4OracleInputs& in);
// fp64 reference of C (exact MXFP4 decode): [m, n] as double; NaN where a NaN scale reaches. abs_sum, when
// given, receives sum_k |a * w| per element (the scale of fp32 summation error, for elementwise bounds).
std::vector<double> mxfp4_oracle_reference(const Mxfp4OracleCase& oc, const Mxfp4OracleInputs& in,
                                           std::vector<double>* abs_sum = nullptr);

}  // namespace ktune::test
