#include "support/family_oracle.hpp"

#include <cmath>

#include "common/dtype.h"
#include "common/mxfp4.h"

namespace ktune::test {

namespace kc = ::ktune_common;

uint64_t fnv1a(const void* data, size_t n, uint64_t h) {
  const unsigned char* b = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// ---- sparse_mla_decode ----

std::vector<MlaOracleCase> mla_oracle_cases() {
  using ktune::mla::KvFormat;
  auto problem = [](int heads, int topk, int page, KvFormat f, int q_len) {
    ktune::mla::Problem p;
    p.num_heads = heads;
    p.kv_lora_rank = 512;
    p.rope_dim = 64;
    p.topk = topk;
    p.page_size = page;
    p.kv_format = f;
    p.max_q_len = q_len;
    p.validate();
    return p;
  };
  auto opts = [](int tokens, bool sinks, int all_skip_token) {
    MlaCaseOptions o;
    o.num_tokens = tokens;
    o.sinks = sinks;
    o.all_skip_token = all_skip_token;
    return o;
  };
  return {
      {"fp8_h16_k256_p64_sinks", problem(16, 256, 64, KvFormat::Fp8DsMla, 1), opts(4, true, 1)},
      {"bf16_h16_k128_p64", problem(16, 128, 64, KvFormat::Bf16, 1), opts(3, false, 2)},
      {"fp8_h64_k512_p256_mtp2", problem(64, 512, 256, KvFormat::Fp8DsMla, 2), opts(4, false, -1)},
      {"fp8_h128_k200_p64", problem(128, 200, 64, KvFormat::Fp8DsMla, 1), opts(2, false, -1)},
      {"bf16_h32_k300_p256_sinks", problem(32, 300, 256, KvFormat::Bf16, 1), opts(3, true, 0)},
  };
}

MlaCase make_mla_oracle_case(const MlaOracleCase& oc, uint64_t seed) {
  MlaCaseOptions o = oc.options;
  o.seed = seed;
  return make_mla_case(oc.problem, o);
}

uint64_t mla_input_digest(const MlaCase& c) {
  uint64_t h = fnv1a(c.q.data(), c.q.size() * sizeof(uint16_t));
  h = fnv1a(c.kv.data(), c.kv.size(), h);
  h = fnv1a(c.indices.data(), c.indices.size() * sizeof(int32_t), h);
  h = fnv1a(c.sinks.data(), c.sinks.size() * sizeof(float), h);
  return fnv1a(&c.softmax_scale, sizeof(float), h);
}

// ---- mxfp4_gemm ----

std::vector<Mxfp4OracleCase> mxfp4_oracle_cases() {
  auto problem = [](int n, int k, int e, int top_k, kc::DType t) {
    ktune::mxfp4::Problem p;
    p.n = n;
    p.k = k;
    p.num_experts = e;
    p.top_k = top_k;
    p.a_dtype = t;
    p.out_dtype = t;
    p.validate();
    return p;
  };
  const kc::DType BF = kc::kBF16, FP = kc::kFP16;
  std::vector<Mxfp4OracleCase> v;
  auto add = [&](const char* name, ktune::mxfp4::Problem p, int m, bool bias, std::vector<int> off = {},
                 int nan_row = -1, int nan_block = -1) {
    Mxfp4OracleCase c;
    c.name = name;
    c.problem = p;
    c.m = off.empty() ? m : off.back();
    c.bias = bias;
    c.offsets = std::move(off);
    c.nan_row = nan_row;
    c.nan_block = nan_block;
    v.push_back(std::move(c));
  };
  add("dense_m1_n512_k1024_bias", problem(512, 1024, 1, 1, BF), 1, true);
  add("dense_m7_n100_k96_tails", problem(100, 96, 1, 1, BF), 7, false);
  add("dense_m16_n256_k512_fp16", problem(256, 512, 1, 1, FP), 16, true);
  add("dense_m64_n192_k256_nan", problem(192, 256, 1, 1, BF), 64, true, {}, 37, 3);
  add("dense_m300_n160_k320", problem(160, 320, 1, 1, BF), 300, false);
  // 5 experts: empty, 17 rows, empty, 1 row, 40 rows
  add("grouped_e5_n128_k256_bias", problem(128, 256, 5, 2, BF), 0, true, {0, 0, 17, 17, 18, 58});
  return v;
}

namespace {
struct SplitMix {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return double(next() >> 11) * (1.0 / 9007199254740992.0); }
  float normal() {
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};
uint16_t to16(float v, kc::DType t) { return t == kc::kBF16 ? kc::float_to_bf16(v) : kc::float_to_fp16(v); }
double from16(uint16_t v, kc::DType t) { return t == kc::kBF16 ? kc::bf16_to_float(v) : kc::fp16_to_float(v); }
}  // namespace

Mxfp4OracleInputs make_mxfp4_oracle_inputs(const Mxfp4OracleCase& oc, uint64_t seed) {
  const auto& p = oc.problem;
  SplitMix rng{seed * 0x9E3779B97F4A7C15ull + 11};
  Mxfp4OracleInputs in;
  in.a.resize(size_t(std::max(oc.m, 1)) * p.k);
  for (auto& x : in.a) x = to16(rng.normal(), p.a_dtype);
  in.w.resize(size_t(p.num_experts) * p.n * p.k / 2);
  for (auto& b : in.w) b = uint8_t(rng.next());
  in.s.resize(size_t(p.num_experts) * p.n * p.k / 32);
  for (auto& b : in.s) b = uint8_t(120 + rng.next() % 13);  // 2^-7 .. 2^5
  if (oc.nan_row >= 0) in.s[size_t(oc.nan_row) * (p.k / 32) + oc.nan_block] = 0xFF;
  in.bias.resize(size_t(p.num_experts) * p.n);
  for (auto& x : in.bias) x = to16(4.f * rng.normal(), p.out_dtype);
  return in;
}

uint64_t mxfp4_input_digest(const Mxfp4OracleInputs& in) {
  uint64_t h = fnv1a(in.a.data(), in.a.size() * sizeof(uint16_t));
  h = fnv1a(in.w.data(), in.w.size(), h);
  h = fnv1a(in.s.data(), in.s.size(), h);
  return fnv1a(in.bias.data(), in.bias.size() * sizeof(uint16_t), h);
}

std::vector<double> mxfp4_oracle_reference(const Mxfp4OracleCase& oc, const Mxfp4OracleInputs& in,
                                           std::vector<double>* abs_sum) {
  const auto& p = oc.problem;
  const int n = p.n, k = p.k;
  std::vector<double> c(size_t(oc.m) * n);
  if (abs_sum) abs_sum->assign(c.size(), 0.0);
  for (int r = 0; r < oc.m; ++r) {
    int e = 0;
    if (!oc.offsets.empty())
      while (r >= oc.offsets[size_t(e) + 1]) ++e;
    for (int col = 0; col < n; ++col) {
      const size_t wrow = size_t(e) * n + col;
      double acc = 0, sabs = 0;
      for (int kk = 0; kk < k; ++kk) {
        const unsigned code = (in.w[wrow * (k / 2) + kk / 2] >> (4 * (kk % 2))) & 15u;
        const double w = double(kc::e2m1_to_float(code)) * double(kc::e8m0_to_float(in.s[wrow * (k / 32) + kk / 32]));
        const double t = from16(in.a[size_t(r) * k + kk], p.a_dtype) * w;
        acc += t;
        sabs += std::fabs(t);
      }
      if (oc.bias) acc += from16(in.bias[size_t(e) * n + col], p.out_dtype);
      c[size_t(r) * n + col] = acc;
      if (abs_sum) (*abs_sum)[size_t(r) * n + col] = sabs;
    }
  }
  return c;
}

}  // namespace ktune::test
