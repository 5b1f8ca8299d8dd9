#include "xqa_reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <thread>

#include "common/mask.cuh"
#include "common/numerics.cuh"

namespace ktune::test {
namespace {

namespace kc = ::ktune_common;
using ktune::xqa::Layout;
using ktune::xqa::MaskKind;
using ktune::xqa::Problem;

struct Req {
  int q_start, n, L;
};

Req request(const Problem& pr, const ktune_xqa::Params& p, int b) {
  Req r;
  if (p.q_cu_seq_lens) {
    r.q_start = p.q_cu_seq_lens[b];
    r.n = p.q_cu_seq_lens[b + 1] - r.q_start;
  } else {
    r.n = p.q_len_per_req;
    r.q_start = b * r.n;
  }
  r.L = p.seq_lens[b];
  r.n = std::min(r.n, pr.max_q_len);
  return r;
}

// One (request, kv head): all group_size x n query rows of that head.
void one_item(const Problem& pr, const ktune_xqa::Params& p, int b, int kvh, XqaRefResult* res) {
  const Req r = request(pr, p, b);
  if (r.n <= 0 || r.L <= 0) return;
  const int D = pr.head_dim, HQ = pr.num_q_heads, HKV = pr.num_kv_heads, G = pr.group_size(), P = pr.page_size;
  const long long page_elems = 2LL * HKV * P * D;
  const int kvt = int(pr.kv_dtype), qt = int(pr.q_dtype);
  std::vector<double> K((size_t)r.L * D), V((size_t)r.L * D), q(D), logit(r.L), acc(D);
  {
    for (int k = 0; k < r.L; ++k) {
      const long long page = p.block_tables[(long long)b * p.max_pages_per_req + k / P];
      const int off = k % P;
      const long long e = page * page_elems + (pr.layout == Layout::Hnd ? ((long long)kvh * P + off) * D
                                                                        : ((long long)off * HKV + kvh) * D);
      const long long ve = e + (long long)HKV * P * D;
      for (int d = 0; d < D; ++d) {
        K[(size_t)k * D + d] = kc::to_float(kvt, p.kv_cache, e + d);
        V[(size_t)k * D + d] = kc::to_float(kvt, p.kv_cache, ve + d);
      }
    }
    for (int i = 0; i < r.n; ++i) {
      const int pos = r.L - r.n + i, draft0 = r.L - r.n;
      const int words = kc::draft_mask_words(pr.max_q_len);  // the problem's row stride, whatever r.n is
      for (int gh = 0; gh < G; ++gh) {
        const int hq = kvh * G + gh;
        const long long qoff = ((long long)(r.q_start + i) * HQ + hq) * D;
        for (int d = 0; d < D; ++d) q[d] = kc::to_float(qt, p.q, qoff + d);
        double mx = -std::numeric_limits<double>::infinity();
        for (int k = 0; k < r.L; ++k) {
          bool vis = true;
          if (k >= draft0) {
            const int j = k - draft0;
            vis = pr.mask == MaskKind::Explicit ? kc::draft_mask_visible(p.mask, r.q_start + i, words, j) : j <= i;
          }
          if (pr.sliding_window && p.window_left >= 0 && k < pos - p.window_left) vis = false;
          if (!vis) {
            logit[k] = -std::numeric_limits<double>::infinity();
            continue;
          }
          double s = 0;
          for (int d = 0; d < D; ++d) s += q[d] * K[(size_t)k * D + d];
          s *= p.bmm1_scale;
          if (pr.softcap && p.softcap > 0) s = p.softcap * std::tanh(s / p.softcap);
          logit[k] = s;
          mx = std::max(mx, s);
        }
        const bool sink = pr.has_sinks && p.sinks;
        if (sink) mx = std::max(mx, (double)p.sinks[hq]);
        double denom = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        if (std::isfinite(mx)) {
          for (int k = 0; k < r.L; ++k) {
            if (!std::isfinite(logit[k])) continue;
            const double w = std::exp(logit[k] - mx);
            denom += w;
            const double* v = &V[(size_t)k * D];
            for (int d = 0; d < D; ++d) acc[d] += w * v[d];
          }
          if (sink) denom += std::exp(p.sinks[hq] - mx);
        }
        const long long row = (long long)(r.q_start + i) * HQ + hq;
        for (int d = 0; d < D; ++d) res->out[row * D + d] = denom > 0 ? acc[d] / denom * p.bmm2_scale : 0.0;
        res->lse[row] = denom > 0 ? mx + std::log(denom) : -std::numeric_limits<double>::infinity();
      }
    }
  }
}

}  // namespace

XqaRefResult xqa_reference(const Problem& pr, const ktune_xqa::Params& p, int threads) {
  XqaRefResult res;
  res.out.assign((size_t)p.num_tokens * pr.num_q_heads * pr.head_dim, 0.0);
  res.lse.assign((size_t)p.num_tokens * pr.num_q_heads, 0.0);
  res.written.assign(p.num_tokens, 0);
  if (threads <= 0) threads = (int)std::max(1u, std::thread::hardware_concurrency());
  for (int b = 0; b < p.batch; ++b) {
    const Req r = request(pr, p, b);
    if (r.n > 0 && r.L > 0)
      for (int i = 0; i < r.n; ++i) res.written[r.q_start + i] = 1;
  }
  const int items = p.batch * pr.num_kv_heads;
  threads = std::min(threads, std::max(1, items));
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int it = t; it < items; it += threads) one_item(pr, p, it / pr.num_kv_heads, it % pr.num_kv_heads, &res);
    });
  for (auto& th : pool) th.join();
  return res;
}

XqaCompare xqa_compare(const Problem& pr, const XqaRefResult& ref, const void* out_dev, const float* lse_dev,
                       unsigned char poison) {
  XqaCompare c;
  const int D = pr.head_dim, HQ = pr.num_q_heads;
  const int es = kc::dtype_size(int(pr.out_dtype));
  const double row_floor = pr.out_dtype == kc::kE4M3 ? std::sqrt(double(D)) * 0.03125 : 1e-3;
  const long long tokens = (long long)ref.written.size();
  double num = 0, den = 0;
  for (long long t = 0; t < tokens; ++t) {
    for (int h = 0; h < HQ; ++h) {
      const long long row = t * HQ + h;
      if (!ref.written[t]) {
        const unsigned char* bytes = static_cast<const unsigned char*>(out_dev) + row * D * es;
        for (long long i = 0; i < (long long)D * es; ++i) c.clobbered += bytes[i] != poison;
        if (lse_dev) {
          unsigned char lb[4];
          std::memcpy(lb, &lse_dev[row], 4);
          for (unsigned char x : lb) c.clobbered += x != poison;
        }
        continue;
      }
      double rn = 0, rd = 0;
      for (int d = 0; d < D; ++d) {
        const double o = kc::to_float(int(pr.out_dtype), out_dev, row * D + d);
        const double r = ref.out[row * D + d];
        if (!std::isfinite(o)) {
          ++c.nonfinite;
          continue;
        }
        rn += (o - r) * (o - r);
        rd += r * r;
      }
      num += rn;
      den += rd;
      // Floor on the row norm: an e4m3 output cannot resolve rows far below its normal range (2^-6).
      c.max_row_rel = std::max(c.max_row_rel, std::sqrt(rn) / std::max(std::sqrt(rd), row_floor));
      if (lse_dev) {
        const double a = lse_dev[row], b = ref.lse[row];
        if (std::isinf(b) && std::isinf(a) && (a < 0) == (b < 0)) continue;
        if (!std::isfinite(a)) ++c.nonfinite;
        else c.lse_max_abs = std::max(c.lse_max_abs, std::fabs(a - b));
      }
    }
  }
  c.rel_l2 = std::sqrt(num) / std::max(std::sqrt(den), 1e-30);
  return c;
}

}  // namespace ktune::test
