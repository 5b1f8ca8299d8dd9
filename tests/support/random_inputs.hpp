// Random xqa_decode problems on the host, in the exact layouts of params.h: random (not page-aligned) seq_lens,
// shuffled block tables (unused entries -1), NaN-filled unused pages and page tails (any stray read shows),
// random explicit masks, zero-length (CUDA-graph padding) requests.
#pragma once

#include <cstdint>
#include <vector>

#include "xqa_decode/params.h"
#include "xqa_decode/spec.hpp"

namespace ktune::test {

struct XqaRandomOptions {
  int batch = 4;
  int min_seq_len = 1;        // KV lengths drawn in [max(n, min), max]
  int max_seq_len = 2048;
  double short_fraction = 0.3;  // fraction of requests with seq_len in [n, n + 40] (mask-dominated)
  bool ragged = false;        // q_cu_seq_lens instead of q_len_per_req
  int q_len = -1;             // uniform q_len_per_req (-1: problem.max_q_len); ragged: per-request random 0..max
  double zero_fraction = 0.0; // requests made zero-length (ragged: n = 0; uniform: seq_len = 0)
  int extra_pages = 8;        // unused (NaN) pages in the cache
  int window_left = 64;       // used when problem.sliding_window
  float softcap = 20.f;       // used when problem.softcap
  float logit_sharpness = 1.5f;  // bmm1_scale = sharpness / sqrt(head_dim) * k_scale
  uint64_t seed = 1;
};

struct XqaRandomCase {
  ktune::xqa::Problem problem;
  XqaRandomOptions opt;
  std::vector<unsigned char> q, kv, mask_bytes;
  std::vector<int> block_tables, seq_lens, q_cu;
  std::vector<unsigned short> mask;
  std::vector<float> sinks;
  int batch = 0, num_tokens = 0, q_len_per_req = 0, max_pages_per_req = 0;
  long long num_pages = 0;
  float k_scale = 1, v_scale = 1, bmm1_scale = 1, bmm2_scale = 1, softcap = 0;
  int window_left = -1;
  int max_seq_len = 0;        // largest seq_len drawn

  // Params over the host arrays (out/lse/workspace null).
  ktune_xqa::Params host_params() const;
};

XqaRandomCase make_xqa_case(const ktune::xqa::Problem& problem, const XqaRandomOptions& opt);

// A validated problem from its fields, in the order the test matrices list them.
ktune::xqa::Problem make_xqa_problem(int head_dim, int num_q_heads, int num_kv_heads, int page_size,
                                     ktune::xqa::Layout layout, ktune::xqa::DType q, ktune::xqa::DType kv,
                                     ktune::xqa::DType out, int max_q_len, ktune::xqa::MaskKind mask, bool sinks,
                                     bool window, bool softcap, bool lse);

// Fast deterministic generator (splitmix64) for the helpers and the harnesses.
struct SplitMix {
  uint64_t s;
  explicit SplitMix(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 1) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return (next() >> 11) * (1.0 / 9007199254740992.0); }  // [0, 1)
  int range(int lo, int hi) { return lo + int(next() % uint64_t(hi - lo + 1)); }  // [lo, hi]
  float normalish() { return float((uniform() + uniform() + uniform() + uniform() - 2.0) * 1.7320508); }
};

// Fills `count` elements of dtype `t` at `dst` with random values of about unit scale (times `scale`).
void fill_random(int dtype, void* dst, size_t count, SplitMix& rng, float scale = 1.f);

}  // namespace ktune::test
