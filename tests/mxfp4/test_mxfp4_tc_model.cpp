// The sm_100a tcgen05 path (".tc", templates/mxfp4_gemm/kernel_tc.cuh) cannot run here, so this CPU test runs
// everything of it that is not the hardware: each shared-memory stage is filled by the kernel's own functions
// (templates/mxfp4_gemm/tc_stage.h) from the real prepacked weight, and a model of the tensor core reads it back
// through the kernel's own descriptors (common/tcgen05.cuh):
//   - tcgen05.cp.32x128b.warpx4: tensor-memory column c, lane l <- bytes 16 l + 4 c of the 512-byte block at the
//     descriptor's start address;
//   - tcgen05.mma kind::mxf8f6f4.block_scale, M = 128, N and the scale-byte ids from the instruction
//     descriptor: A(m, k) and B(n, k) (k < 32) at start + 16 (r % 8) + SBO (r / 8) + (k % 16) + LBO (k / 16),
//     row m's scale in column sfa + m / 32, lane m % 32, byte sfa_id (B likewise), D += sum_k A B 2^(sa-127)
//     2^(sb-127).
// The model is the documented behaviour (PTX ISA tcgen05 chapter; public sm_100 kernels), not the hardware: it
// checks the k order, the padding, the scale gather and the descriptor fields against each other, and the
// result against the exact reference on MXFP8-rounded activations with the GPU tests' tolerance.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/mxfp4.h"
#include "common/numerics.cuh"
#include "common/tcgen05.cuh"
#include "mxfp4_gemm/spec.hpp"
#include "mxfp4_gemm/tc_stage.h"
#include "support/mxfp4_reference.hpp"

using namespace ktune;
using namespace ktune::mxfp4;
namespace kc = ::ktune_common;
namespace km = ::ktune_mxfp4;

namespace {

struct SmemOperand {
  unsigned start, lbo, sbo;
};
SmemOperand decode_desc(unsigned long long d) {
  REQUIRE(((d >> 46) & 7u) == 1u);  // the fixed version bits
  REQUIRE((d >> 61) == 0u);         // no swizzle
  return {unsigned(d & 0x3FFFu) << 4, unsigned((d >> 16) & 0x3FFFu) << 4, unsigned((d >> 32) & 0x3FFFu) << 4};
}

// Tensor memory of one CTA: [column][lane] 32-bit words (the four lane quarters hold the same scale words).
struct Tmem {
  std::vector<unsigned> cell = std::vector<unsigned>(512 * 32, 0u);
  unsigned& at(int col, int lane) { return cell[size_t(col) * 32 + lane]; }
};

void model_copy_scales(Tmem& t, int col, const std::vector<unsigned char>& smem, unsigned long long desc) {
  const SmemOperand d = decode_desc(desc);
  CHECK(d.sbo == 128);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      unsigned w;
      std::memcpy(&w, smem.data() + d.start + 16 * l + 4 * c, 4);
      t.at(col + c, l) = w;
    }
}

double scale_of(unsigned word, int id) {
  const unsigned e = (word >> (8 * id)) & 0xFFu;
  return e == 0xFF ? std::nan("") : std::ldexp(1.0, int(e) - 127);
}

void model_mma(std::vector<double>& D, int bm, const std::vector<unsigned char>& smem, unsigned long long adesc,
               unsigned long long bdesc, unsigned idesc, Tmem& t, int sfa_col, int sfb_col, bool accumulate) {
  const int n = int((idesc >> 17) & 63u) * 8, m = int((idesc >> 27) & 3u) * 128;
  REQUIRE(m == 128);
  REQUIRE(n == bm);
  CHECK(((idesc >> 7) & 7u) == 0u);   // A e4m3
  CHECK(((idesc >> 10) & 7u) == 0u);  // B e4m3
  CHECK(((idesc >> 23) & 1u) == 1u);  // ue8m0 scales
  CHECK(((idesc >> 15) & 3u) == 0u);  // both K-major
  const int sfa_id = int((idesc >> 29) & 3u), sfb_id = int((idesc >> 4) & 3u);
  const SmemOperand a = decode_desc(adesc), b = decode_desc(bdesc);
  auto elem = [&](const SmemOperand& o, int r, int k) {
    return double(kc::e4m3_to_float(smem[o.start + 16 * (r % 8) + o.sbo * (r / 8) + (k % 16) + o.lbo * (k / 16)]));
  };
  for (int r = 0; r < m; ++r) {
    const double sa = scale_of(t.at(sfa_col + r / 32, r % 32), sfa_id);
    for (int c = 0; c < n; ++c) {
      const double sb = scale_of(t.at(sfb_col + c / 32, c % 32), sfb_id);
      double acc = 0;
      for (int k = 0; k < 32; ++k) acc += elem(a, r, k) * elem(b, c, k);
      double& d = D[size_t(r) * n + c];
      d = (accumulate ? d : 0.0) + acc * sa * sb;
    }
  }
}

// One ".tc" call through the model: every CTA (128 weight rows x bm tokens) as kernel_tc.cuh runs it.
std::vector<uint16_t> model_call(const Problem& p, const test::Mxfp4TestWeight& W, const std::vector<uint16_t>& a,
                                 const std::vector<uint16_t>& bias, int m, int bm) {
  const int n16 = (p.n + 15) / 16, kc_ = (p.k + 63) / 64, nstages = (kc_ + 1) / 2;
  const int sfa_col = bm, sfb_col = bm + 8;
  const int stage = km::tc_stage_bytes(bm);
  const unsigned* wq = reinterpret_cast<const unsigned*>(W.packed.data());
  std::vector<uint16_t> out(size_t(m) * p.n, 0xFFFF);
  for (int bx = 0; bx * 8 < n16; ++bx)
    for (int m0 = 0; m0 < m; m0 += bm) {
      const int m1 = std::min(m, m0 + bm), nt0 = bx * 8;
      std::vector<unsigned char> smem(size_t(2) * stage, 0xA5);  // poison: every byte read must be written
      for (int st = 0; st < 2; ++st)
        for (int r = bm; r < 128; ++r)
          km::tc_store_u32(smem.data() + st * stage + km::tc_sfb_offset(bm) + km::tc_scale_off(r), 0x7F7F7F7Fu);
      Tmem tm;
      std::vector<double> D(size_t(128) * bm, std::nan(""));
      for (int ks = 0; ks < nstages; ++ks) {
        unsigned char* pa = smem.data() + (ks & 1) * stage;
        std::memset(pa, 0xA5, km::tc_sfb_offset(bm));  // the kernel rewrites A, B and SFA every stage
        for (int it = 0; it < 512; ++it) {
          const int c = 2 * ks + (it >> 8), nt = nt0 + ((it >> 5) & 7);
          unsigned w[4] = {0u, 0u, 0u, 0u};
          if (c < kc_ && nt < n16) std::memcpy(w, wq + (size_t(c) * n16 + nt) * 128 + (it & 31) * 4, 16);
          km::tc_store_weight(pa, it, w);
        }
        for (int r = 0; r < 128; ++r)
          km::tc_store_u32(pa + km::tc_sfa_offset(bm) + km::tc_scale_off(r),
                           km::tc_weight_scale_word(W.packed_scales.data(), n16, kc_, nt0 * 16 + r, ks));
        for (int it = 0; it < bm * 4; ++it) {
          const int j = it >> 2, b = it & 3, row = m0 + j, k0 = ks * 128 + 32 * b;
          float x[32];
          for (int e = 0; e < 32; ++e)
            x[e] = (row < m1 && k0 < p.k) ? kc::bf16_to_float(a[size_t(row) * p.k + k0 + e]) : 0.f;
          km::tc_store_activations(pa + km::tc_b_offset(), pa + km::tc_sfb_offset(bm), j, b, x);
        }
        const unsigned sa = unsigned((ks & 1) * stage);
        const int sfa = sfa_col + 4 * (ks & 1), sfb = sfb_col + 4 * (ks & 1);
        model_copy_scales(tm, sfa, smem, kc::tc_smem_desc(sa + km::tc_sfa_offset(bm), 0, 128));
        model_copy_scales(tm, sfb, smem, kc::tc_smem_desc(sa + km::tc_sfb_offset(bm), 0, 128));
        for (int kk = 0; kk < 4; ++kk)
          model_mma(D, bm, smem, kc::tc_smem_desc(sa + 256 * kk, 128, 1024),
                    kc::tc_smem_desc(sa + km::tc_b_offset() + 256 * kk, 128, 1024), kc::tc_idesc_e4m3(bm, kk, kk), tm,
                    sfa, sfb, ks > 0 || kk > 0);
      }
      for (int r = 0; r < 128; ++r)
        for (int j = 0; j < m1 - m0; ++j) {
          const int col = nt0 * 16 + r;
          if (col >= p.n) continue;
          const double v = D[size_t(r) * bm + j] + (bias.empty() ? 0.0 : kc::bf16_to_float(bias[col]));
          out[size_t(m0 + j) * p.n + col] = kc::float_to_bf16(float(v));
        }
    }
  return out;
}

}  // namespace

TEST_CASE("mxfp4_gemm .tc (sm_100a): the kernel's stages through a model of the tensor core", "[mxfp4][tc_model]") {
  std::mt19937_64 rng(20261130);
  // N = 200: a partial second CTA (13 of 16 tiles); K = 352: 6 chunks, the last stage half padding
  Problem p;
  p.n = 200;
  p.k = 352;
  p.validate();
  for (int nan_row : {-1, 37}) {
    const test::Mxfp4TestWeight W = test::make_mxfp4_weight(p.n, p.k, 1, rng, nan_row, nan_row < 0 ? -1 : 1);
    for (int bm : {16, 32, 128}) {
      const int m = 37;
      const std::vector<uint16_t> a = test::random_16bit(size_t(m) * p.k, kc::kBF16, 1.f, rng);
      const std::vector<uint16_t> bias = test::random_16bit(size_t(p.n), kc::kBF16, 4.f, rng);
      const std::vector<uint16_t> c = model_call(p, W, a, bias, m, bm);
      const std::vector<uint16_t> a_ref = test::mxfp8_roundtrip(a, m, p.k, p.k, kc::kBF16);
      std::vector<int> rows(m);
      for (int r = 0; r < m; ++r) rows[r] = r;
      const test::Mxfp4Check r = test::mxfp4_check(p, W, a_ref, p.k, bias.data(), c, p.n, m, {}, nan_row, rows);
      INFO("bm " << bm << " nan_row " << nan_row << ": rel " << r.rel << ", bad " << r.bad << " of " << r.checked
                 << (r.first_bad.empty() ? "" : ", first: " + r.first_bad));
      CHECK(r.unwritten == 0);
      CHECK(r.bad == 0);
      CHECK(r.rel < 5e-3);
    }
  }
}
