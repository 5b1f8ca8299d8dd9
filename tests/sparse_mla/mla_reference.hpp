// sparse_mla_decode on the host: random cases in the exact layouts of templates/sparse_mla_decode/params.h and
// an fp64 reference that decodes fp8_ds_mla exactly (e4m3 value x its tile's fp32 scale; rope bf16).
// Header-only so the bench can use it too.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <numeric>
#include <thread>
#include <vector>

#include "common/numerics.cuh"
#include "sparse_mla_decode/spec.hpp"

namespace ktune::test {

struct MlaRng {  // splitmix64
  uint64_t s;
  explicit MlaRng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 7) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }
  int range(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }
  float normal() {  // Box-Muller
    double u1 = uniform(), u2 = uniform();
    if (u1 < 1e-300) u1 = 1e-300;
    return float(std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2));
  }
};

struct MlaCaseOptions {
  int num_tokens = 4;
  double skip_fraction = 0.1;   // indices set to -1
  int all_skip_token = 0;       // this token gets only -1 (< 0: none)
  int extra_pages = 6;          // pages never referenced: NaN-filled (a stray read shows)
  bool sinks = false;
  float logit_sharpness = 1.5f; // softmax_scale = sharpness / sqrt(dim)
  uint64_t seed = 1;
};

struct MlaCase {
  ktune::mla::Problem p;
  MlaCaseOptions opt;
  std::vector<uint16_t> q;              // [T, H, dim] bf16 bits
  std::vector<unsigned char> kv;        // [num_pages, page_size, row_bytes]
  std::vector<int32_t> indices;         // [T, topk]
  std::vector<float> sinks;             // [H] or empty
  int64_t num_pages = 0;
  float softmax_scale = 0;
};

// One cache row decoded to fp32 (dim values: latent then rope).
inline void mla_decode_row(const ktune::mla::Problem& p, const unsigned char* row, float* out) {
  namespace kc = ::ktune_common;
  const int lat = p.kv_lora_rank, dim = p.dim();
  if (p.kv_format == ktune::mla::KvFormat::Fp8DsMla) {
    float scales[8];
    std::memcpy(scales, row + lat, sizeof(float) * (lat / 128));
    for (int i = 0; i < lat; ++i) out[i] = kc::e4m3_to_float(row[i]) * scales[i / 128];
    const unsigned char* rope = row + lat + 4 * (lat / 128);
    for (int i = 0; i < p.rope_dim; ++i) {
      uint16_t b;
      std::memcpy(&b, rope + 2 * i, 2);
      out[lat + i] = kc::bf16_to_float(b);
    }
  } else {
    for (int i = 0; i < dim; ++i) {
      uint16_t b;
      std::memcpy(&b, row + 2 * i, 2);
      out[i] = kc::bf16_to_float(b);
    }
  }
}

// Encodes one row from fp32 values (fp8_ds_mla: per-128 tile scale = amax / 448, values rounded to e4m3).
inline void mla_encode_row(const ktune::mla::Problem& p, const float* v, unsigned char* row) {
  namespace kc = ::ktune_common;
  const int lat = p.kv_lora_rank, dim = p.dim();
  if (p.kv_format == ktune::mla::KvFormat::Fp8DsMla) {
    for (int t = 0; t < lat / 128; ++t) {
      float amax = 0;
      for (int i = 0; i < 128; ++i) amax = std::max(amax, std::fabs(v[t * 128 + i]));
      const float scale = amax > 0 ? amax / 448.f : 1.f;
      std::memcpy(row + lat + 4 * t, &scale, 4);
      for (int i = 0; i < 128; ++i) row[t * 128 + i] = kc::float_to_e4m3(v[t * 128 + i] / scale);
    }
    unsigned char* rope = row + lat + 4 * (lat / 128);
    for (int i = 0; i < p.rope_dim; ++i) {
      const uint16_t b = kc::float_to_bf16(v[lat + i]);
      std::memcpy(rope + 2 * i, &b, 2);
    }
  } else {
    for (int i = 0; i < dim; ++i) {
      const uint16_t b = kc::float_to_bf16(v[i]);
      std::memcpy(row + 2 * i, &b, 2);
    }
  }
}

// Fresh random case: pages in random physical places (a shuffled subset of the cache), random slots within
// them, a fraction of -1s, one token all -1, NaN in every page no index refers to.
inline MlaCase make_mla_case(const ktune::mla::Problem& p, const MlaCaseOptions& o) {
  namespace kc = ::ktune_common;
  MlaCase c;
  c.p = p;
  c.opt = o;
  MlaRng rng(o.seed);
  const int T = o.num_tokens, H = p.num_heads, dim = p.dim(), rb = p.row_bytes(), P = p.page_size;
  c.q.resize(size_t(T) * H * dim);
  for (auto& x : c.q) x = kc::float_to_bf16(rng.normal());
  // Enough used pages to hold ~topk distinct slots per token, spread over a larger cache.
  const int used_pages = std::max(2, (p.topk + P - 1) / P + 1);
  c.num_pages = used_pages + o.extra_pages;
  std::vector<int> perm(size_t(c.num_pages));
  std::iota(perm.begin(), perm.end(), 0);
  for (size_t i = perm.size(); i > 1; --i) std::swap(perm[i - 1], perm[rng.next() % i]);
  const std::vector<int> used(perm.begin(), perm.begin() + used_pages);
  c.kv.assign(size_t(c.num_pages) * P * rb, 0xFF);  // NaN in every format (e4m3 0xFF, bf16/fp32 all-ones)
  std::vector<float> vals(dim);
  for (int pg : used)
    for (int s = 0; s < P; ++s) {
      float amp[8];
      for (int t = 0; t < 8; ++t) amp[t] = float(0.25 + 2.0 * rng.uniform());
      for (int i = 0; i < dim; ++i) vals[i] = rng.normal() * (i < p.kv_lora_rank ? amp[i / 128] : 1.f);
      mla_encode_row(p, vals.data(), c.kv.data() + (size_t(pg) * P + s) * rb);
    }
  c.indices.resize(size_t(T) * p.topk);
  for (int t = 0; t < T; ++t)
    for (int k = 0; k < p.topk; ++k) {
      int32_t v;
      if (t == o.all_skip_token || rng.uniform() < o.skip_fraction) v = -1;
      else v = used[rng.next() % used.size()] * P + int(rng.next() % P);
      c.indices[size_t(t) * p.topk + k] = v;
    }
  if (o.sinks) {
    c.sinks.resize(H);
    for (auto& s : c.sinks) s = float(-1.0 + 4.0 * rng.uniform());
  }
  c.softmax_scale = o.logit_sharpness / std::sqrt(float(dim));
  return c;
}

struct MlaRef {
  std::vector<float> out;  // [T, H, lat]
  std::vector<float> lse;  // [T, H]
  // The LSE over the logits q . bf16(k): the kernel rounds each dequantized K element to bf16 before the tensor
  // cores multiply it by the (bf16) query, so this is what it computes up to fp32 accumulation and ex2/lg2
  // rounding. lse_tol bounds those per row: 2^-16 * scale * max over slots of sum |q_d k_d| (the accumulation
  // over dim terms; 2^-16 leaves the tensor cores' fp32 adds ample room) + 2^-18 * (1 + |lse|) (the exponentials,
  // the log and the final m + log l). Empty when the reference was built some other way (the host oracle).
  std::vector<float> lse_k16, lse_tol;  // [T, H]
};

// fp64 reference; indices outside [0, num_slots) other than -1 are skipped too (what a checked kernel does).
inline MlaRef mla_reference(const MlaCase& c) {
  namespace kc = ::ktune_common;
  const auto& p = c.p;
  const int T = c.opt.num_tokens, H = p.num_heads, dim = p.dim(), lat = p.kv_lora_rank, rb = p.row_bytes();
  const int64_t slots = c.num_pages * p.page_size;
  MlaRef r;
  r.out.assign(size_t(T) * H * lat, 0.f);
  r.lse.assign(size_t(T) * H, 0.f);
  r.lse_k16.assign(size_t(T) * H, 0.f);
  r.lse_tol.assign(size_t(T) * H, 0.f);
  const unsigned threads = std::max(1u, std::min(16u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned th = 0; th < threads; ++th)
    pool.emplace_back([&, th] {
      std::vector<float> kvf, kv16;
      std::vector<double> logit, logit16, acc(lat);
      std::vector<float> qf(dim);
      for (int t = 0; t < T; ++t) {
        // rows of this token (decoded once per token per thread that handles some of its heads)
        bool mine = false;
        for (int h = 0; h < H; ++h) mine |= (size_t(t) * H + h) % threads == th;
        if (!mine) continue;
        std::vector<int64_t> sel;
        for (int k = 0; k < p.topk; ++k) {
          const int64_t s = c.indices[size_t(t) * p.topk + k];
          if (s >= 0 && s < slots) sel.push_back(s);
        }
        kvf.resize(sel.size() * dim);
        for (size_t i = 0; i < sel.size(); ++i) mla_decode_row(p, c.kv.data() + size_t(sel[i]) * rb, kvf.data() + i * dim);
        kv16.resize(kvf.size());
        for (size_t i = 0; i < kvf.size(); ++i) kv16[i] = kc::bf16_to_float(kc::float_to_bf16(kvf[i]));
        logit.resize(sel.size());
        logit16.resize(sel.size());
        for (int h = 0; h < H; ++h) {
          if ((size_t(t) * H + h) % threads != th) continue;
          for (int i = 0; i < dim; ++i) qf[i] = kc::bf16_to_float(c.q[(size_t(t) * H + h) * dim + i]);
          double m = -std::numeric_limits<double>::infinity(), m16 = m, mag16 = 0;
          for (size_t i = 0; i < sel.size(); ++i) {
            double s = 0, s16 = 0, a16 = 0;
            const float* k = kvf.data() + i * dim;
            const float* k16 = kv16.data() + i * dim;
            for (int d = 0; d < dim; ++d) {
              s += double(qf[d]) * k[d];
              s16 += double(qf[d]) * k16[d];
              a16 += std::fabs(double(qf[d]) * k16[d]);
            }
            logit[i] = s * c.softmax_scale;
            logit16[i] = s16 * c.softmax_scale;
            mag16 = std::max(mag16, a16 * c.softmax_scale);
            m = std::max(m, logit[i]);
            m16 = std::max(m16, logit16[i]);
          }
          const bool sink = !c.sinks.empty();
          if (sink) m = std::max(m, double(c.sinks[h]));
          if (sink) m16 = std::max(m16, double(c.sinks[h]));
          double den16 = sink ? std::exp(double(c.sinks[h]) - m16) : 0.0;
          for (size_t i = 0; i < sel.size(); ++i) den16 += std::exp(logit16[i] - m16);
          const size_t row = size_t(t) * H + h;
          if (den16 > 0) {
            const double l16 = m16 + std::log(den16);
            r.lse_k16[row] = float(l16);
            r.lse_tol[row] = float(std::ldexp(mag16, -16) + std::ldexp(1.0 + std::fabs(l16), -18));
          } else {
            r.lse_k16[row] = -std::numeric_limits<float>::infinity();
          }
          std::fill(acc.begin(), acc.end(), 0.0);
          double den = sink ? std::exp(double(c.sinks[h]) - m) : 0.0;
          for (size_t i = 0; i < sel.size(); ++i) {
            const double w = std::exp(logit[i] - m);
            den += w;
            const float* v = kvf.data() + i * dim;
            for (int d = 0; d < lat; ++d) acc[d] += w * v[d];
          }
          float* o = r.out.data() + (size_t(t) * H + h) * lat;
          if (den > 0) {
            for (int d = 0; d < lat; ++d) o[d] = float(acc[d] / den);
            r.lse[size_t(t) * H + h] = float(m + std::log(den));
          } else {
            r.lse[size_t(t) * H + h] = -std::numeric_limits<float>::infinity();
          }
        }
      }
    });
  for (auto& t : pool) t.join();
  return r;
}

struct MlaCompare {
  // lse_max_abs: the largest |lse - r.lse| (the exact LSE; what the host kernel, fp32 on exact K, is held to);
  // lse_max_ratio: the largest |lse - r.lse_k16| / r.lse_tol (pass: < 1; what the GPU kernel, which rounds K to
  // bf16, is held to), 0 when the reference has no lse_k16.
  double rel_l2 = 0, max_row_rel = 0, lse_max_abs = 0, lse_max_ratio = 0;
  long long nonfinite = 0, lse_bad = 0;
};

// out: bf16 bits [T, H, lat]; lse may be null.
inline MlaCompare mla_compare(const MlaCase& c, const MlaRef& r, const uint16_t* out, const float* lse) {
  namespace kc = ::ktune_common;
  const int T = c.opt.num_tokens, H = c.p.num_heads, lat = c.p.kv_lora_rank;
  MlaCompare m;
  double num = 0, den = 0;
  for (size_t row = 0; row < size_t(T) * H; ++row) {
    double rn = 0, rd = 0;
    for (int d = 0; d < lat; ++d) {
      const float g = kc::bf16_to_float(out[row * lat + d]);
      const double ref = r.out[row * lat + d];
      if (!std::isfinite(g)) ++m.nonfinite;
      rn += (g - ref) * (g - ref);
      rd += ref * ref;
    }
    num += rn;
    den += rd;
    // a row that should be zero (no valid index) must be exactly zero
    if (rd == 0) {
      if (rn != 0) m.max_row_rel = std::max(m.max_row_rel, 1.0);
    } else {
      m.max_row_rel = std::max(m.max_row_rel, std::sqrt(rn / rd));
    }
    if (lse) {
      const float a = lse[row], b = r.lse[row];
      if (std::isinf(b)) {
        if (!(std::isinf(a) && a < 0)) ++m.lse_bad;
      } else if (!std::isfinite(a)) {
        ++m.lse_bad;
      } else {
        m.lse_max_abs = std::max(m.lse_max_abs, double(std::fabs(a - b)));
        if (!r.lse_k16.empty())
          m.lse_max_ratio = std::max(m.lse_max_ratio, std::fabs(double(a) - r.lse_k16[row]) / r.lse_tol[row]);
      }
    }
  }
  m.rel_l2 = den > 0 ? std::sqrt(num / den) : std::sqrt(num);
  return m;
}

}  // namespace ktune::test
