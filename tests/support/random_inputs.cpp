#include "random_inputs.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <thread>

#include "common/mask.cuh"
#include "common/numerics.cuh"

namespace ktune::test {

namespace kc = ::ktune_common;
using ktune::xqa::Layout;
using ktune::xqa::MaskKind;

void fill_random(int dtype, void* dst, size_t count, SplitMix& rng, float scale) {
  for (size_t i = 0; i < count; ++i) {
    const float v = rng.normalish() * scale;
    switch (dtype) {
      case kc::kBF16: static_cast<unsigned short*>(dst)[i] = kc::float_to_bf16(v); break;
      case kc::kFP16: static_cast<unsigned short*>(dst)[i] = kc::float_to_fp16(v); break;
      case kc::kE4M3: static_cast<unsigned char*>(dst)[i] = kc::float_to_e4m3(v); break;
      default: static_cast<float*>(dst)[i] = v; break;
    }
  }
}

static void fill_nan(int dtype, unsigned char* dst, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    if (dtype == kc::kE4M3) dst[i] = 0x7F;
    else reinterpret_cast<unsigned short*>(dst)[i] = dtype == kc::kBF16 ? 0x7FC0 : 0x7E00;
  }
}

ktune_xqa::Params XqaRandomCase::host_params() const {
  ktune_xqa::Params p{};
  p.q = q.data();
  p.kv_cache = kv.data();
  p.block_tables = block_tables.data();
  p.seq_lens = seq_lens.data();
  p.q_cu_seq_lens = opt.ragged ? q_cu.data() : nullptr;
  p.mask = problem.mask == MaskKind::Explicit ? mask.data() : nullptr;
  p.sinks = problem.has_sinks ? sinks.data() : nullptr;
  p.batch = batch;
  p.num_tokens = num_tokens;
  p.q_len_per_req = q_len_per_req;
  p.max_pages_per_req = max_pages_per_req;
  p.num_pages = num_pages;
  p.bmm1_scale = bmm1_scale;
  p.bmm2_scale = bmm2_scale;
  p.softcap = softcap;
  p.window_left = window_left;
  p.num_splits = 1;
  return p;
}

XqaRandomCase make_xqa_case(const ktune::xqa::Problem& pr, const XqaRandomOptions& opt) {
  pr.validate();
  XqaRandomCase c;
  c.problem = pr;
  c.opt = opt;
  c.batch = opt.batch;
  SplitMix rng(opt.seed);
  const int QL = pr.max_q_len, D = pr.head_dim, P = pr.page_size, HKV = pr.num_kv_heads, HQ = pr.num_q_heads;

  // query lengths
  std::vector<int> n(c.batch);
  c.q_len_per_req = opt.q_len < 0 ? QL : std::min(opt.q_len, QL);
  std::vector<bool> zero(c.batch, false);
  for (int b = 0; b < c.batch; ++b) zero[b] = rng.uniform() < opt.zero_fraction;
  c.q_cu.assign(c.batch + 1, 0);
  for (int b = 0; b < c.batch; ++b) {
    n[b] = opt.ragged ? (zero[b] ? 0 : rng.range(1, QL)) : c.q_len_per_req;
    c.q_cu[b + 1] = c.q_cu[b] + n[b];
  }
  c.num_tokens = c.q_cu[c.batch];

  // KV lengths
  c.seq_lens.resize(c.batch);
  for (int b = 0; b < c.batch; ++b) {
    const int lo = std::max(std::max(n[b], 1), opt.min_seq_len);
    int L = rng.uniform() < opt.short_fraction ? rng.range(std::max(n[b], 1), std::max(n[b], 1) + 40)
                                               : rng.range(lo, std::max(lo, opt.max_seq_len));
    if (!opt.ragged && zero[b]) L = 0;
    c.seq_lens[b] = L;
    c.max_seq_len = std::max(c.max_seq_len, L);
  }

  // pages: shuffled, unused entries -1
  int total_pages = 0;
  for (int b = 0; b < c.batch; ++b) {
    const int need = (c.seq_lens[b] + P - 1) / P;
    c.max_pages_per_req = std::max(c.max_pages_per_req, need);
    total_pages += need;
  }
  c.max_pages_per_req += 1;  // a spare column: never read
  c.num_pages = total_pages + opt.extra_pages;
  std::vector<int> perm(c.num_pages);
  std::iota(perm.begin(), perm.end(), 0);
  for (long long i = c.num_pages - 1; i > 0; --i) std::swap(perm[i], perm[rng.next() % uint64_t(i + 1)]);
  c.block_tables.assign((size_t)c.batch * c.max_pages_per_req, -1);
  int next = 0;
  for (int b = 0; b < c.batch; ++b)
    for (int i = 0; i < (c.seq_lens[b] + P - 1) / P; ++i) c.block_tables[(size_t)b * c.max_pages_per_req + i] = perm[next++];

  // KV cache: NaN everywhere, then random values in every slot a request owns (k < L)
  const int kvt = int(pr.kv_dtype), es = kc::dtype_size(kvt);
  const long long page_elems = 2LL * HKV * P * D;
  c.kv.resize((size_t)(c.num_pages * page_elems * es));
  fill_nan(kvt, c.kv.data(), (size_t)(c.num_pages * page_elems));
  const float kv_amp = kvt == kc::kE4M3 ? 8.f : 1.f;  // use the e4m3 range, incl. subnormals
  auto fill_request = [&](int b) {
    SplitMix r(opt.seed * 1000003ull + 7919ull * (b + 1));
    for (int k = 0; k < c.seq_lens[b]; ++k) {
      const long long page = c.block_tables[(size_t)b * c.max_pages_per_req + k / P];
      const int off = k % P;
      for (int h = 0; h < HKV; ++h) {
        const long long e = page * page_elems +
                            (pr.layout == Layout::Hnd ? ((long long)h * P + off) * D : ((long long)off * HKV + h) * D);
        fill_random(kvt, c.kv.data() + e * es, D, r, kv_amp);
        fill_random(kvt, c.kv.data() + (e + (long long)HKV * P * D) * es, D, r, kv_amp);
      }
    }
  };
  {
    const int nt = (int)std::max(1u, std::min(std::thread::hardware_concurrency(), 32u));
    std::vector<std::thread> pool;
    for (int t = 0; t < nt; ++t)
      pool.emplace_back([&, t] {
        for (int b = t; b < c.batch; b += nt) fill_request(b);
      });
    for (auto& th : pool) th.join();
  }

  // Q, mask, sinks, scales
  const int qt = int(pr.q_dtype);
  c.q.resize((size_t)c.num_tokens * HQ * D * kc::dtype_size(qt));
  fill_random(qt, c.q.data(), (size_t)c.num_tokens * HQ * D, rng, qt == kc::kE4M3 ? 4.f : 1.f);
  const int words = kc::draft_mask_words(QL);
  c.mask.assign((size_t)std::max(c.num_tokens, 1) * words * 2, 0);
  for (int b = 0; b < c.batch; ++b)
    for (int i = 0; i < n[b]; ++i) {
      const long long row = c.q_cu[b] + i;
      for (int j = 0; j < n[b]; ++j)
        if (j == i || rng.uniform() < 0.5) kc::draft_mask_set(c.mask.data(), row, words, j);
    }
  c.sinks.resize(HQ);
  for (int h = 0; h < HQ; ++h) c.sinks[h] = float(rng.uniform() * 6.0 - 1.0);
  c.k_scale = kvt == kc::kE4M3 ? 1.f / kv_amp : 1.f;
  c.v_scale = kvt == kc::kE4M3 ? 1.f / kv_amp : 1.f;
  const float q_scale = qt == kc::kE4M3 ? 0.25f : 1.f;  // only an FP8 Q carries q_scale into bmm1
  c.bmm1_scale = opt.logit_sharpness / std::sqrt(float(D)) * c.k_scale * q_scale;
  c.bmm2_scale = c.v_scale * (pr.out_dtype == kc::kE4M3 ? 4.f : 1.f);  // / o_scale (0.25) for FP8 output
  c.softcap = pr.softcap ? opt.softcap : 0.f;
  c.window_left = pr.sliding_window ? opt.window_left : -1;
  return c;
}

ktune::xqa::Problem make_xqa_problem(int head_dim, int num_q_heads, int num_kv_heads, int page_size,
                                     ktune::xqa::Layout layout, ktune::xqa::DType q, ktune::xqa::DType kv,
                                     ktune::xqa::DType out, int max_q_len, ktune::xqa::MaskKind mask, bool sinks,
                                     bool window, bool softcap, bool lse) {
  ktune::xqa::Problem p;
  p.head_dim = head_dim;
  p.num_q_heads = num_q_heads;
  p.num_kv_heads = num_kv_heads;
  p.page_size = page_size;
  p.layout = layout;
  p.q_dtype = q;
  p.kv_dtype = kv;
  p.out_dtype = out;
  p.max_q_len = max_q_len;
  p.mask = mask;
  p.has_sinks = sinks;
  p.sliding_window = window;
  p.softcap = softcap;
  p.write_lse = lse;
  p.validate();
  return p;
}

}  // namespace ktune::test
