// Inputs of the sparse MLA dev harnesses (mla_ws.cu, mla_ws_sanitize.cu): 128 heads, kv_lora_rank 512 + rope 64, an
// fp8_ds_mla cache of `pages` x `page` random rows (e4m3 latent, never NaN; rope bf16 around 1), random bf16 Q and
// random top-k slots, uploaded and wired into a Params (out, LSE and a split workspace allocated, NaN-free).
#pragma once
#include <cuda_runtime.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda_check.hpp"
#include "sparse_mla_decode/params.h"

struct MlaDevInputs {
  int tokens = 0, topk = 0;
  long long slots = 0;
  std::vector<unsigned char> kv;  // [slots, 656]
  std::vector<unsigned short> q;  // [tokens, 128, 576]
  std::vector<int> idx;           // [tokens, topk]
};

// varied_scales: each 128-block scale drawn from [0.005, 0.015] (else all 0.01); skip_percent of the entries -1
// and, when all_skip_token >= 0, every entry of that token -1.
inline MlaDevInputs make_mla_dev_inputs(int tokens, int topk, int pages, int page, bool varied_scales,
                                        int skip_percent, int all_skip_token) {
  constexpr int kRow = 656;
  MlaDevInputs in;
  in.tokens = tokens;
  in.topk = topk;
  in.slots = (long long)pages * page;
  in.kv.resize(size_t(in.slots) * kRow);
  unsigned x = 7;
  auto rnd = [&] { return x = x * 1664525u + 1013904223u; };
  for (long long s = 0; s < in.slots; ++s) {
    unsigned char* r = in.kv.data() + s * kRow;
    for (int i = 0; i < 512; ++i) r[i] = (rnd() >> 24) & 0x77;
    for (int i = 0; i < 4; ++i) {
      const float sc = varied_scales ? 0.005f + 0.01f * float((rnd() >> 8) & 0xFF) / 255.f : 0.01f;
      std::memcpy(r + 512 + 4 * i, &sc, 4);
    }
    for (int i = 0; i < 64; ++i) {
      const unsigned short b = 0x3C00 | ((rnd() >> 25) & 0xFF) | (rnd() & 0x8000);
      std::memcpy(r + 528 + 2 * i, &b, 2);
    }
  }
  in.q.resize(size_t(tokens) * 128 * 576);
  for (auto& v : in.q) v = 0x3C00 | ((rnd() >> 25) & 0xFF) | (rnd() & 0x8000);
  in.idx.resize(size_t(tokens) * topk);
  for (auto& v : in.idx) v = skip_percent > 0 && int(rnd() % 100) < skip_percent ? -1 : int(rnd() % in.slots);
  if (all_skip_token >= 0)
    for (int i = 0; i < topk; ++i) in.idx[size_t(all_skip_token) * topk + i] = -1;
  return in;
}

namespace ktune_mla {
// The Specs the sm_90a dev harnesses launch: the library's default wgmma kernel (t64.s1.g64.wg) and the
// warp-specialized one (t64.s2.g64.ws), 128 heads, fp8_ds_mla, page 64, top-k kTopkValue.
template <int kTopkValue>
struct DevBaseSpec {
  static constexpr int kNumHeads = 128, kLat = 512, kRope = 64, kTopk = kTopkValue, kPageSize = 64;
  static constexpr bool kFp8 = true;
  static constexpr int kMaxQLen = 1;
  static constexpr bool kChecked = false;
  static constexpr int kHeadsPerCta = 64, kTile = 64, kStages = 1, kWarps = 8;
  static constexpr bool kWgmma = true;
};
template <int kTopkValue>
struct DevWsSpec : DevBaseSpec<kTopkValue> {
  static constexpr int kStages = 2;
};
}  // namespace ktune_mla

// A bf16 bit pattern as a double.
inline double bf16_value(unsigned short h) {
  unsigned u = unsigned(h) << 16;
  float v;
  std::memcpy(&v, &u, 4);
  return v;
}

// A dev kernel's outputs (bf16) and LSE against a reference run on the same inputs: rel L2 over the outputs finite
// on both sides, the largest |LSE difference| over finite entries, how many outputs differ bit for bit, and `bad`:
// entries non-finite on one side only, or an infinite / NaN LSE that does not match the reference bit for bit (an
// empty row's -inf must).
struct MlaDiff {
  double rel_out = 0, lse_worst = 0;
  size_t differ = 0, bad = 0;
  // Within bf16 rounding of the reference: what the dev harnesses count as a pass.
  bool within_bf16() const { return bad == 0 && rel_out < 1e-2 && lse_worst < 1e-3; }
};
inline MlaDiff compare_mla_outputs(const std::vector<unsigned short>& ref_out, const std::vector<float>& ref_lse,
                                   const std::vector<unsigned short>& out, const std::vector<float>& lse) {
  MlaDiff d;
  double num = 0, den = 0;
  for (size_t i = 0; i < ref_out.size(); ++i) {
    const double u = bf16_value(ref_out[i]), v = bf16_value(out[i]);
    d.differ += ref_out[i] != out[i];
    if (std::isfinite(u) != std::isfinite(v)) ++d.bad;
    if (!std::isfinite(u) || !std::isfinite(v)) continue;
    num += (u - v) * (u - v);
    den += u * u;
  }
  for (size_t i = 0; i < ref_lse.size(); ++i) {
    if (!std::isfinite(ref_lse[i]) || !std::isfinite(lse[i])) {
      d.bad += std::memcmp(&ref_lse[i], &lse[i], 4) != 0;
      continue;
    }
    d.lse_worst = std::fmax(d.lse_worst, std::fabs(double(ref_lse[i]) - lse[i]));
  }
  d.rel_out = den > 0 ? std::sqrt(num / den) : 0;
  return d;
}

// Device copies of the inputs and outputs for up to in.tokens tokens and `max_splits` splits, in a Params.
inline ktune_mla::Params upload_mla_dev_inputs(const MlaDevInputs& in, int max_splits) {
  void *dkv, *dq, *dout;
  int* didx;
  float *dlse, *dws;
  CK(cudaMalloc(&dkv, in.kv.size()));
  CK(cudaMalloc(&dq, in.q.size() * 2));
  CK(cudaMalloc(&didx, in.idx.size() * 4));
  CK(cudaMalloc(&dout, size_t(in.tokens) * 128 * 512 * 2));
  CK(cudaMalloc(&dlse, size_t(in.tokens) * 128 * 4));
  CK(cudaMalloc(&dws, size_t(in.tokens) * 128 * max_splits * (512 + 2) * 4));
  CK(cudaMemcpy(dkv, in.kv.data(), in.kv.size(), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dq, in.q.data(), in.q.size() * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(didx, in.idx.data(), in.idx.size() * 4, cudaMemcpyHostToDevice));
  ktune_mla::Params p{};
  p.q = dq;
  p.kv_cache = dkv;
  p.indices = didx;
  p.out = dout;
  p.lse = dlse;
  p.workspace = dws;
  p.num_tokens = in.tokens;
  p.num_splits = 1;
  p.num_slots = in.slots;
  p.softmax_scale = 0.0417f;
  return p;
}
