#include "support/mxfp4_reference.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <stdexcept>
#include <thread>

#include "common/mxfp4.h"
#include "common/numerics.cuh"

namespace ktune::test {
namespace {

namespace kc = ::ktune_common;

void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& f) {
  const int threads = int(std::max(1u, std::min(16u, std::thread::hardware_concurrency())));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back([&, t] { f(n * t / threads, n * (t + 1) / threads); });
  for (auto& th : pool) th.join();
}

float from16(uint16_t v, kc::DType t) { return t == kc::kBF16 ? kc::bf16_to_float(v) : kc::fp16_to_float(v); }

}  // namespace

Mxfp4TestWeight make_mxfp4_weight(int n, int k, int e, std::mt19937_64& rng, int nan_row, int nan_block,
                                  Mxfp4Scales scales) {
  Mxfp4TestWeight W;
  W.n = n;
  W.k = k;
  W.e = e;
  W.w.resize(size_t(e) * n * k / 2);
  W.s.resize(size_t(e) * n * k / 32);
  for (auto& b : W.w) b = uint8_t(rng());
  std::uniform_int_distribution<int> sc(scales.lo, scales.hi), big(129, 132);
  std::bernoulli_distribution outlier(scales.outliers);
  for (auto& b : W.s) b = uint8_t(scales.outliers > 0 && outlier(rng) ? big(rng) : sc(rng));
  if (nan_row >= 0)
    for (int x = 0; x < e; ++x) W.s[(size_t(x) * n + nan_row) * (k / 32) + nan_block] = 0xFF;
  W.dec.resize(size_t(e) * n * k);
  parallel_for(int64_t(e) * n, [&](int64_t lo, int64_t hi) {
    for (int64_t r = lo; r < hi; ++r)
      for (int c = 0; c < k; ++c) {
        const unsigned code = (W.w[size_t(r) * (k / 2) + c / 2] >> (4 * (c % 2))) & 15u;
        W.dec[size_t(r) * k + c] = kc::e2m1_to_float(code) * kc::e8m0_to_float(W.s[size_t(r) * (k / 32) + c / 32]);
      }
  });
  W.packed.resize(mxfp4::packed_weight_bytes(n, k, e));
  W.packed_scales.resize(mxfp4::packed_scale_bytes(n, k, e));
  mxfp4::prepack_host(W.w.data(), W.s.data(), n, k, e, W.packed.data(), W.packed_scales.data());
  return W;
}

std::vector<uint16_t> random_16bit(size_t count, kc::DType t, float sigma, std::mt19937_64& rng) {
  std::normal_distribution<float> nd(0.f, sigma);
  std::vector<uint16_t> v(count);
  for (auto& x : v) {
    float f = nd(rng);
    if (f == 0.f) f = 0.5f * sigma;
    x = t == kc::kBF16 ? kc::float_to_bf16(f) : kc::float_to_fp16(f);
    if ((x & 0x7FFF) == 0) x = t == kc::kBF16 ? kc::float_to_bf16(sigma) : kc::float_to_fp16(sigma);
  }
  return v;
}

std::vector<int> mxfp4_random_offsets(int experts, int total_hint, std::mt19937_64& rng) {
  std::vector<int> off(size_t(experts) + 1, 0);
  for (int e = 0; e < experts; ++e) {
    int cnt = 0;
    const int kind = int(rng() % 5);
    if (kind == 0) cnt = 0;
    else if (kind == 1) cnt = 1 + int(rng() % 3);
    else cnt = int(rng() % (2 * total_hint / experts + 1));
    off[e + 1] = off[e] + cnt;
  }
  return off;
}

std::vector<int> mxfp4_rows_to_check(int m, std::mt19937_64& rng) {
  std::vector<int> rows;
  if (m <= 16) {
    for (int r = 0; r < m; ++r) rows.push_back(r);
  } else {
    rows = {0, m - 1};
    while (rows.size() < 16) rows.push_back(int(rng() % m));
  }
  return rows;
}

std::vector<uint16_t> mxfp8_roundtrip(const std::vector<uint16_t>& a, int rows, int k, int lda, kc::DType t) {
  std::vector<uint16_t> out = a;
  auto to_f = [t](uint16_t h) { return t == kc::kBF16 ? kc::bf16_to_float(h) : kc::fp16_to_float(h); };
  auto from_f = [t](float f) { return t == kc::kBF16 ? kc::float_to_bf16(f) : kc::float_to_fp16(f); };
  for (int r = 0; r < rows; ++r)
    for (int b = 0; b < k; b += 32) {
      const size_t base = size_t(r) * lda + b;
      float amax = 0.f;
      for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(to_f(a[base + i])));
      const unsigned e = kc::mxfp8_scale_byte(amax);
      const float f = kc::mxfp8_inv_scale(e);
      for (int i = 0; i < 32; ++i) {
        const float q = std::ldexp(kc::e4m3_to_float(kc::float_to_e4m3(to_f(a[base + i]) * f)), int(e) - 127);
        out[base + i] = from_f(q);
        if (to_f(out[base + i]) != q)
          throw std::runtime_error("mxfp8_roundtrip: a dequantized value is not exact in the activation dtype");
      }
    }
  return out;
}

Mxfp4Check mxfp4_check(const mxfp4::Problem& p, const Mxfp4TestWeight& W, const std::vector<uint16_t>& a, int lda,
                       const uint16_t* bias, const std::vector<uint16_t>& c, int ldc, int m,
                       const std::vector<int>& offsets, int nan_col, const std::vector<int>& rows) {
  const int n = p.n, k = p.k;
  std::vector<int> expert_of(size_t(m), 0);
  if (!offsets.empty())
    for (int e = 0; e < p.num_experts; ++e)
      for (int r = offsets[e]; r < offsets[e + 1]; ++r) expert_of[r] = e;
  Mxfp4Check res;
  for (int r = 0; r < m; ++r)
    for (int col = 0; col < n; ++col)
      if (std::isnan(from16(c[size_t(r) * ldc + col], p.out_dtype)) && col != nan_col) ++res.unwritten;
  std::vector<double> err2(rows.size()), ref2(rows.size());
  std::vector<int64_t> bad(rows.size());
  std::vector<std::string> first(rows.size());
  parallel_for(int64_t(rows.size()) * n, [&](int64_t lo, int64_t hi) {
    std::vector<float> af(k);
    int64_t last_row = -1;
    for (int64_t i = lo; i < hi; ++i) {
      const int ri = int(i / n), col = int(i % n), r = rows[ri];
      if (r != last_row) {
        for (int kk = 0; kk < k; ++kk) af[kk] = from16(a[size_t(r) * lda + kk], p.a_dtype);
        last_row = r;
      }
      const int e = expert_of[r];
      const float* w = W.dec.data() + (size_t(e) * n + col) * k;
      double acc = 0, sabs = 0;
      for (int kk = 0; kk < k; ++kk) {
        const double t = double(af[kk] * w[kk]);  // exact in fp32 (a 16-bit value times a scaled e2m1)
        acc += t;
        sabs += std::fabs(t);
      }
      if (bias) acc += from16(bias[size_t(e) * n + col], p.out_dtype);
      const double got = from16(c[size_t(r) * ldc + col], p.out_dtype);
      if (col == nan_col) {
        if (!std::isnan(got)) {
          ++bad[ri];
          if (first[ri].empty()) first[ri] = "row " + std::to_string(r) + " col " + std::to_string(col) + " expected NaN";
        }
        continue;
      }
      const double tol = std::ldexp(std::fabs(acc), -7) + std::ldexp(sabs, -16) + 1e-30;
      const double d = got - acc;
      err2[ri] += d * d;
      ref2[ri] += acc * acc;
      if (!(std::fabs(d) <= tol)) {
        ++bad[ri];
        if (first[ri].empty())
          first[ri] = "row " + std::to_string(r) + " col " + std::to_string(col) + ": got " + std::to_string(got) +
                      ", expected " + std::to_string(acc) + " (tol " + std::to_string(tol) + ")";
      }
    }
  });
  double e2 = 0, r2 = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    e2 += err2[i];
    r2 += ref2[i];
    res.bad += bad[i];
    if (res.first_bad.empty()) res.first_bad = first[i];
  }
  res.rel = r2 > 0 ? std::sqrt(e2 / r2) : 0;
  res.checked = int64_t(rows.size()) * n;
  return res;
}

}  // namespace ktune::test
