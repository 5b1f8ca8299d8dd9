// mxfp4_gemm through the real runtime (ktune::mxfp4_gemm) against an exact host reference
// (support/mxfp4_reference.hpp, shared with the host tests): MXFP4 decoded exactly (common/mxfp4.h), fp32
// products of the bf16/fp16-rounded activations, accumulated in fp64.
//
// [gpu][mxfp4]: M {1, 7, 16, 64, 100, 200, 1000, 4096} x (N, K) {(8192, 8192), (5760, 2880), (2880, 2880)} x
//   bias on/off with the launch's own config (100 and 200: the 128- and 256-row buckets' wgmma defaults); every config of the search space on a small ragged shape (N, K tails);
//   fp16 activations/outputs (every config on the small shape, dense and grouped); bf16 in / fp16 out and fp16 in /
//   bf16 out; non-default lda/ldc; grouped (MoE) with uneven and empty experts, and with 40 and 128 experts (more
//   than one 32-expert pass of the kernel's expert search); NaN scales.
//   Data are fresh every run (the seed is printed; KTUNE_TEST_SEED replays it): random e2m1 codes, e8m0 scales
//   in 2^-7..2^5 (and, for the few-token paths, 2^-10..2^0 alone and with rare larger scales), N(0,1) activations. Outputs are poisoned (0xFF: NaN) and every element is checked to be
//   written. Rows checked against the reference: all when M <= 16, else 16 random rows (first and last
//   included); every column of a checked row. Tolerance per element: |out - ref| <= 2^-7 |ref| + 2^-16
//   sum_k |a w| (output rounding + accumulation order), and ||out - ref|| / ||ref|| < 5e-3 per case.
// [.][mxfp4_precompile]: compiles every kernel these tests use into $KTUNE_CACHE for sm_90a (no GPU needed).
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/mxfp4.h"
#include "common/numerics.cuh"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/mxfp4_gemm.hpp"
#include "support/family_oracle.hpp"
#include "support/gpu.hpp"
#include "support/mxfp4_reference.hpp"
#include "support/precompile.hpp"
#include "support/seed.hpp"
#include "support/xqa_oracle.hpp"

using namespace ktune;
using namespace ktune::mxfp4;
namespace kc = ::ktune_common;

namespace {

// One seed for the whole run (printed by whichever test draws it first); each test offsets it.
uint64_t run_seed() {
  static const uint64_t seed = test::run_seed("mxfp4 gpu");
  return seed;
}

Runtime& runtime() {
  static Runtime rt(RuntimeOptions::from_env());
  return rt;
}

// A weight in canonical form (fresh random), its exact decode (support/mxfp4_reference.hpp), and its packed
// device copy.
struct Weight {
  test::Mxfp4TestWeight host;
  std::unique_ptr<test::DeviceBuffer> dw, ds;
  Mxfp4Weight desc() const {
    return Mxfp4Weight{packed_layout_version(), host.n, host.k, host.e, dw->as<void>(), ds->as<void>()};
  }
};

Weight make_weight(int n, int k, int e, std::mt19937_64& rng, int nan_row = -1, int nan_block = -1,
                   test::Mxfp4Scales scales = {}) {
  Weight W;
  W.host = test::make_mxfp4_weight(n, k, e, rng, nan_row, nan_block, scales);
  W.dw = std::make_unique<test::DeviceBuffer>(W.host.packed.size());
  W.ds = std::make_unique<test::DeviceBuffer>(W.host.packed_scales.size());
  W.dw->upload(W.host.packed);
  W.ds->upload(W.host.packed_scales);
  return W;
}

using CaseResult = test::Mxfp4Check;

// Runs one call and checks it. offsets: grouped row offsets (host copy), empty for dense.
// mxfp8: the config is a native ".mx" one, so the reference uses the activations rounded to MXFP8 as the kernel
// does (test::mxfp8_roundtrip); everything else is checked exactly as for the W4A16 path.
CaseResult run_case(const Problem& p, const Weight& W, int m, bool bias, std::mt19937_64& rng, const char* config,
                    const std::vector<int>& offsets = {}, int lda_pad = 0, int ldc_pad = 0, int nan_col = -1,
                    bool mxfp8 = false) {
  const int n = p.n, k = p.k, lda = k + lda_pad, ldc = n + ldc_pad;
  const std::vector<uint16_t> a = test::random_16bit(size_t(std::max(m, 1)) * lda, p.a_dtype, 1.f, rng);
  const std::vector<uint16_t> b = test::random_16bit(size_t(p.num_experts) * n, p.out_dtype, 4.f, rng);
  test::DeviceBuffer da(a.size() * 2), dc(size_t(std::max(m, 1)) * ldc * 2), db(b.size() * 2),
      doff(std::max<size_t>(offsets.size(), 1) * 4);
  da.upload(a);
  db.upload(b);
  dc.poison();
  if (!offsets.empty()) doff.upload(offsets);
  Mxfp4GemmArgs args;
  args.a = da.as<void>();
  args.lda = lda_pad ? lda : 0;
  args.weight = W.desc();
  args.bias = bias ? db.as<void>() : nullptr;
  args.c = dc.as<void>();
  args.ldc = ldc_pad ? ldc : 0;
  args.m = m;
  args.expert_offsets = offsets.empty() ? nullptr : doff.as<int32_t>();
  args.config = config;
  mxfp4_gemm(runtime(), p, args, nullptr);
  test::sync();
  const std::vector<uint16_t> c = dc.download<uint16_t>(size_t(m) * ldc);
  const std::vector<uint16_t> a_ref = mxfp8 ? test::mxfp8_roundtrip(a, m, k, lda, p.a_dtype) : a;
  return test::mxfp4_check(p, W.host, a_ref, lda, bias ? b.data() : nullptr, c, ldc, m, offsets, nan_col,
                           test::mxfp4_rows_to_check(m, rng));
}

void check_result(const CaseResult& r, const std::string& what) {
  INFO(what << ": rel " << r.rel << ", bad " << r.bad << " of " << r.checked << ", unwritten " << r.unwritten
            << (r.first_bad.empty() ? "" : ", first: " + r.first_bad));
  CHECK(r.unwritten == 0);
  CHECK(r.bad == 0);
  CHECK(r.rel < 5e-3);
}

// Activations of dtype a, outputs (and bias) of dtype out.
Problem problem_dtypes(int n, int k, int e, int top_k, DType a, DType out) {
  Problem p;
  p.n = n;
  p.k = k;
  p.num_experts = e;
  p.top_k = top_k;
  p.a_dtype = a;
  p.out_dtype = out;
  p.validate();
  return p;
}

Problem problem(int n, int k, int e = 1, int top_k = 1, DType t = kc::kBF16) {
  return problem_dtypes(n, k, e, top_k, t, t);
}

// Uneven grouped row offsets (test::mxfp4_random_offsets) with expert 0 empty.
std::vector<int> random_offsets_first_empty(int experts, int total_hint, std::mt19937_64& rng) {
  std::vector<int> off = test::mxfp4_random_offsets(experts, total_hint, rng);
  off[1] = off[0];
  for (size_t e = 1; e < off.size(); ++e) off[e] = std::max(off[e], off[e - 1]);
  return off;
}

// Grouped row offsets from per-expert row counts.
std::vector<int> offsets_from_counts(const std::vector<int>& counts) {
  std::vector<int> off(counts.size() + 1, 0);
  for (size_t e = 0; e < counts.size(); ++e) off[e + 1] = off[e] + counts[e];
  return off;
}

// The small shape where every search-space config is checked.
const Problem kSmall = problem(100, 96);
const Problem kSmallFp16 = problem(100, 96, 1, 1, kc::kFP16);

// Grouped over 8 experts: empty, 17, empty, 1, 72, 200, 150, 110: the wgmma tiles see experts shorter than a tile
// (their N cut to the rows: 32, 64, 96, 128, 160, 224) and ones longer than bm128 and bm192 (a full tile, then a
// short one).
const std::vector<int> kUnevenOffsets = {0, 0, 17, 17, 18, 90, 290, 440, 550};

// More than 32 experts: the kernel finds a CTA's expert 32 experts at a time (kernel.cuh cta_rows), carrying the
// tile count and the last row end from one pass to the next. The gpt-oss-120b preset's 128 experts, and a small
// shape with 40 (a second, partial pass).
const Problem kMoe128 = problem(5760, 2880, 128, 4);
const Problem kSmall40 = problem(100, 96, 40, 2);

// Activation and output dtypes that differ (a, out), dense on N = K = 2880 and grouped on the small shape.
const std::pair<DType, DType> kMixedDtypes[] = {{kc::kBF16, kc::kFP16}, {kc::kFP16, kc::kBF16}};
Problem mixed_dense(const std::pair<DType, DType>& d) { return problem_dtypes(2880, 2880, 1, 1, d.first, d.second); }
Problem mixed_grouped(const std::pair<DType, DType>& d) { return problem_dtypes(100, 96, 8, 2, d.first, d.second); }

}  // namespace

TEST_CASE("mxfp4_gemm matches the exact reference over its GPU matrix", "[gpu][mxfp4]") {
  KTUNE_REQUIRE_GPU();
  std::mt19937_64 rng(run_seed());
  struct NK {
    int n, k;
  };
  size_t case_index = 0;
  for (const NK s : {NK{8192, 8192}, NK{5760, 2880}, NK{2880, 2880}}) {
    const Problem p = problem(s.n, s.k);
    const Weight W = make_weight(s.n, s.k, 1, rng);
    for (int m : {1, 7, 16, 64, 100, 200, 1000, 4096})
      for (bool bias : {false, true}) {
        if (!test::in_test_shard(case_index++)) continue;
        const Mxfp4GemmPlan plan = mxfp4_gemm_plan(runtime(), p, m);
        const CaseResult r = run_case(p, W, m, bias, rng, nullptr);
        std::printf("  %-28s m %5d bias %d  config %-24s rel %.2e bad %lld\n", p.key().c_str(), m, int(bias),
                    plan.config.c_str(), r.rel, (long long)r.bad);
        check_result(r, p.key() + " m " + std::to_string(m) + (bias ? " bias" : "") + " " + plan.config);
      }
  }
}

TEST_CASE("mxfp4_gemm: every search-space config, N and K tails, strides, fp16, NaN scales", "[gpu][mxfp4]") {
  KTUNE_REQUIRE_GPU();
  std::mt19937_64 rng(run_seed() + 1);
  const Arch arch = runtime().current_arch();
  {
    const Weight W = make_weight(kSmall.n, kSmall.k, 1, rng);
    for (const Config& c : search_space(kSmall, arch))
      for (int m : {1, 37, 300}) {
        const std::string key = c.key();
        check_result(run_case(kSmall, W, m, m != 37, rng, key.c_str()), "small m " + std::to_string(m) + " " + key);
      }
    check_result(run_case(kSmall, W, 45, true, rng, nullptr, {}, 24, 5), "lda/ldc padded");
  }
  {
    // The wgmma path's weight ring over a long K with a tail (26 chunks, the last one half: every ring depth
    // wraps, and warpgroups splitting K meet K slots past the end) and an N tail (13 tiles: a CTA copies part of
    // its slot); its decode with scales above 1 (the two-step path), at most 1 (the folded one) and mixed.
    const Problem p = problem(200, 1632);
    using Named = std::pair<const char*, test::Mxfp4Scales>;
    for (const auto& [name, scales] : {Named{"", test::Mxfp4Scales{}}, Named{"model scales ", test::kModelScales},
                                       Named{"mixed scales ", test::kMixedScales}}) {
      const Weight W = make_weight(p.n, p.k, 1, rng, -1, -1, scales);
      for (const Config& c : search_space(p, arch))
        if (c.wgmma)
          for (int m : {37, 300}) {
            const std::string key = c.key();
            check_result(run_case(p, W, m, true, rng, key.c_str()),
                         std::string("long K ") + name + "m " + std::to_string(m) + " " + key);
          }
    }
  }
  {
    const Problem p16 = problem(2880, 2880, 1, 1, kc::kFP16);
    const Weight W = make_weight(p16.n, p16.k, 1, rng);
    for (int m : {7, 64, 1000}) check_result(run_case(p16, W, m, true, rng, nullptr), "fp16 m " + std::to_string(m));
    check_result(run_case(p16, W, 64, false, rng, "bm32.tn2.wn4.wk1.s3.d2"), "fp16 bm32");
  }
  {
    // NaN scale (0xFF) at (row 37, block 1): column 37 of C is NaN for every row; everything else exact.
    const Weight W = make_weight(kSmall.n, kSmall.k, 1, rng, 37, 1);
    for (int m : {1, 16, 200}) check_result(run_case(kSmall, W, m, true, rng, nullptr, {}, 0, 0, 37), "NaN scale m " + std::to_string(m));
    const char* wg = "bm128.tn1.wn8.wk1.s4.d2.wg";  // the wgmma path's pre-scaled fragments (sm_90a)
    if (can_implement(kSmall, Config::from_key(wg), arch, default_limits(arch)).empty())
      check_result(run_case(kSmall, W, 200, true, rng, wg, {}, 0, 0, 37), std::string("NaN scale m 200 ") + wg);
  }
}

TEST_CASE("mxfp4_gemm grouped (MoE): uneven and empty experts, one launch", "[gpu][mxfp4]") {
  KTUNE_REQUIRE_GPU();
  std::mt19937_64 rng(run_seed() + 2);
  const Arch arch = runtime().current_arch();
  {
    const Problem p = problem(5760, 2880, 8, 2);
    const Weight W = make_weight(p.n, p.k, p.num_experts, rng);
    for (int hint : {8, 64, 600}) {
      std::vector<int> off = random_offsets_first_empty(p.num_experts, hint, rng);
      const int m = off.back();
      check_result(run_case(p, W, m, hint != 64, rng, nullptr, off), "grouped 5760x2880 rows " + std::to_string(m));
    }
  }
  {
    const Problem p = problem(kSmall.n, kSmall.k, 8, 2);
    const Weight W = make_weight(p.n, p.k, p.num_experts, rng);
    std::vector<int> off = kUnevenOffsets;
    for (const Config& c : search_space(p, arch)) {
      const std::string key = c.key();
      check_result(run_case(p, W, off.back(), true, rng, key.c_str(), off), "grouped small " + key);
    }
    // All rows in the last expert.
    off = {0, 0, 0, 0, 0, 0, 0, 0, 33};
    check_result(run_case(p, W, 33, false, rng, nullptr, off), "grouped last expert only");
  }
  {
    // The wgmma weight ring, grouped: a long K with a tail and an N tail (see the dense case), experts as above.
    const Problem p = problem(200, 1632, 8, 2);
    const Weight W = make_weight(p.n, p.k, p.num_experts, rng);
    const std::vector<int>& off = kUnevenOffsets;
    for (const Config& c : search_space(p, arch))
      if (c.wgmma) {
        const std::string key = c.key();
        check_result(run_case(p, W, off.back(), true, rng, key.c_str(), off), "grouped long K " + key);
      }
  }
}

// Trained weights' scales are <= 1, and then the few-token BF16 kernels decode and scale each chunk in one fma;
// a chunk holding a larger scale takes the fp32 per-block path. Every few-token config, dense and grouped, with
// scales that fold everywhere and with scales that mix both paths inside one call.
TEST_CASE("mxfp4_gemm few tokens: model-like scales (folded decode) and chunks mixing both paths", "[gpu][mxfp4]") {
  KTUNE_REQUIRE_GPU();
  std::mt19937_64 rng(run_seed() + 3);
  const Arch arch = runtime().current_arch();
  for (const auto& [name, scales] : {std::pair<const char*, test::Mxfp4Scales>{"model", test::kModelScales},
                                     std::pair<const char*, test::Mxfp4Scales>{"mixed", test::kMixedScales}}) {
    const std::string tag = std::string(name) + " scales ";
    {
      const Problem p = problem(5760, 2880);
      const Weight W = make_weight(p.n, p.k, 1, rng, -1, -1, scales);
      for (int m : {1, 5, 16}) check_result(run_case(p, W, m, m != 5, rng, nullptr), tag + p.key() + " m " + std::to_string(m));
    }
    {
      const Weight W = make_weight(kSmall.n, kSmall.k, 1, rng, -1, -1, scales);
      for (const Config& c : search_space(kSmall, arch)) {
        if (c.bm > 16) continue;
        const std::string key = c.key();
        for (int m : {1, 13}) check_result(run_case(kSmall, W, m, true, rng, key.c_str()), tag + "small m " + std::to_string(m) + " " + key);
      }
    }
    {
      const Problem p = problem(5760, 2880, 32, 4);
      const Weight W = make_weight(p.n, p.k, p.num_experts, rng, -1, -1, scales);
      std::vector<int> off = random_offsets_first_empty(p.num_experts, 64, rng);
      check_result(run_case(p, W, off.back(), true, rng, nullptr, off), tag + "grouped 5760x2880 rows " + std::to_string(off.back()));
    }
  }
}

TEST_CASE("mxfp4_gemm grouped with more than 32 experts: the expert search's later passes", "[gpu][mxfp4]") {
  KTUNE_REQUIRE_GPU();
  std::mt19937_64 rng(run_seed() + 5);
  const Arch arch = runtime().current_arch();
  {
    // gpt-oss-120b's 128 experts (top 4) with the launch's own config: about 1, 8 and 64 rows per expert routed
    // at random (the few-row s0 tile, the bm16 ring and the 128-row wgmma tile on sm_90a), four passes each.
    const Problem& p = kMoe128;
    const Weight W = make_weight(p.n, p.k, p.num_experts, rng);
    for (int hint : {128, 1024, 8192}) {
      const std::vector<int> off = random_offsets_first_empty(p.num_experts, hint, rng);
      const int m = off.back();
      const Mxfp4GemmPlan plan = mxfp4_gemm_plan(runtime(), p, m);
      check_result(run_case(p, W, m, hint != 1024, rng, nullptr, off),
                   "grouped e128 rows " + std::to_string(m) + " " + plan.config);
    }
  }
  {
    const Problem& p = kSmall40;
    const Weight W = make_weight(p.n, p.k, p.num_experts, rng);
    // Rows only in experts 33..39 (the first pass finds nothing): 17, empty, 1, 72, 200, 5, 130 rows, experts
    // shorter than every tile and longer than the 128- and 192-row ones.
    std::vector<int> counts(size_t(p.num_experts), 0);
    const std::vector<int> tail = {17, 0, 1, 72, 200, 5, 130};
    std::copy(tail.begin(), tail.end(), counts.begin() + 33);
    const std::vector<int> late = offsets_from_counts(counts);
    // Rows spread over all 40 (random, some empty; expert 0 and 33 empty), the last expert of the first pass (31)
    // and the first of the second (32) not: the second pass starts after the first one's tiles.
    std::vector<int> spread = random_offsets_first_empty(p.num_experts, 2000, rng);
    for (size_t e = 0; e + 1 < spread.size(); ++e) counts[e] = spread[e + 1] - spread[e];
    counts[0] = counts[33] = 0;
    counts[31] = std::max(counts[31], 3);
    counts[32] = std::max(counts[32], 5);
    spread = offsets_from_counts(counts);
    for (const Config& c : search_space(p, arch)) {
      const std::string key = c.key();
      check_result(run_case(p, W, late.back(), true, rng, key.c_str(), late), "grouped e40 experts 33.. only " + key);
      check_result(run_case(p, W, spread.back(), false, rng, key.c_str(), spread),
                   "grouped e40 spread rows " + std::to_string(spread.back()) + " " + key);
    }
  }
}

TEST_CASE("mxfp4_gemm fp16 activations: every search-space config, dense and grouped", "[gpu][mxfp4]") {
  KTUNE_REQUIRE_GPU();
  std::mt19937_64 rng(run_seed() + 6);
  const Arch arch = runtime().current_arch();
  {
    const Weight W = make_weight(kSmallFp16.n, kSmallFp16.k, 1, rng);
    for (const Config& c : search_space(kSmallFp16, arch))
      for (int m : {1, 37, 300}) {
        const std::string key = c.key();
        check_result(run_case(kSmallFp16, W, m, m != 37, rng, key.c_str()),
                     "fp16 small m " + std::to_string(m) + " " + key);
      }
  }
  {
    const Problem p = problem(kSmall.n, kSmall.k, 8, 2, kc::kFP16);
    const Weight W = make_weight(p.n, p.k, p.num_experts, rng);
    for (const Config& c : search_space(p, arch)) {
      const std::string key = c.key();
      check_result(run_case(p, W, kUnevenOffsets.back(), true, rng, key.c_str(), kUnevenOffsets),
                   "fp16 grouped small " + key);
    }
  }
}

TEST_CASE("mxfp4_gemm padded lda/ldc with the launch's own config, dense and grouped", "[gpu][mxfp4]") {
  KTUNE_REQUIRE_GPU();
  std::mt19937_64 rng(run_seed() + 7);
  {
    // lda padded by a multiple of 8 (16-byte rows), ldc by an odd count (rows of C 2-byte aligned only).
    const Weight W = make_weight(kSmall.n, kSmall.k, 1, rng);
    struct Pad {
      int m, lda, ldc;
    };
    for (const Pad pad : {Pad{1, 8, 3}, Pad{16, 24, 5}, Pad{200, 40, 7}}) {
      const std::string config = mxfp4_gemm_plan(runtime(), kSmall, pad.m).config;
      check_result(run_case(kSmall, W, pad.m, true, rng, nullptr, {}, pad.lda, pad.ldc),
                   "padded m " + std::to_string(pad.m) + " lda +" + std::to_string(pad.lda) + " ldc +" +
                       std::to_string(pad.ldc) + " " + config);
    }
  }
  {
    const Problem p = problem(kSmall.n, kSmall.k, 8, 2);
    const Weight W = make_weight(p.n, p.k, p.num_experts, rng);
    const int m = kUnevenOffsets.back();
    const std::string config = mxfp4_gemm_plan(runtime(), p, m).config;
    check_result(run_case(p, W, m, true, rng, nullptr, kUnevenOffsets, 24, 5), "grouped padded " + config);
  }
}

TEST_CASE("mxfp4_gemm activation and output dtypes that differ (bf16 in fp16 out, fp16 in bf16 out)",
          "[gpu][mxfp4]") {
  KTUNE_REQUIRE_GPU();
  std::mt19937_64 rng(run_seed() + 8);
  for (const auto& d : kMixedDtypes) {
    {
      const Problem p = mixed_dense(d);
      const Weight W = make_weight(p.n, p.k, 1, rng);
      for (int m : {1, 16, 128}) {
        const std::string config = mxfp4_gemm_plan(runtime(), p, m).config;
        check_result(run_case(p, W, m, m != 16, rng, nullptr), p.key() + " m " + std::to_string(m) + " " + config);
      }
    }
    {
      const Problem p = mixed_grouped(d);
      const Weight W = make_weight(p.n, p.k, p.num_experts, rng);
      const int m = kUnevenOffsets.back();
      const std::string config = mxfp4_gemm_plan(runtime(), p, m).config;
      check_result(run_case(p, W, m, true, rng, nullptr, kUnevenOffsets), p.key() + " grouped " + config);
    }
  }
}

namespace {

// The matrix both native block-scaled paths (MXFP8 activations) run against the MXFP8-activation reference:
// every config on the ragged small shape at M = 1 / 37 / 300, N = K = 8192 at M = 1 and `big_m`, fp16
// activations at M = 64, grouped with empty experts. `tag` names the path in the messages.
struct NativeMatrix {
  const char* tag;
  std::vector<const char*> configs;
  const char *m1, *big;  // configs for N = K = 8192 at M = 1 and M = big_m
  int big_m;
  const char *fp16, *grouped;
};
void check_native_matrix(const NativeMatrix& nm, std::mt19937_64& rng) {
  const std::string tag = nm.tag;
  {
    const Weight W = make_weight(kSmall.n, kSmall.k, 1, rng);
    for (const char* cfg : nm.configs)
      for (int m : {1, 37, 300})
        check_result(run_case(kSmall, W, m, m != 37, rng, cfg, {}, 0, 0, -1, true),
                     tag + " small m " + std::to_string(m) + " " + cfg);
  }
  {
    const Problem p = problem(8192, 8192);
    const Weight W = make_weight(p.n, p.k, 1, rng);
    check_result(run_case(p, W, 1, true, rng, nm.m1, {}, 0, 0, -1, true), tag + " 8192 m 1");
    check_result(run_case(p, W, nm.big_m, false, rng, nm.big, {}, 0, 0, -1, true),
                 tag + " 8192 m " + std::to_string(nm.big_m));
  }
  {
    const Problem p16 = problem(2880, 2880, 1, 1, kc::kFP16);
    const Weight W = make_weight(p16.n, p16.k, 1, rng);
    check_result(run_case(p16, W, 64, true, rng, nm.fp16, {}, 0, 0, -1, true), tag + " fp16 m 64");
  }
  {
    const Problem p = problem(kSmall.n, kSmall.k, 5, 2);
    const Weight W = make_weight(p.n, p.k, p.num_experts, rng);
    const std::vector<int> off = {0, 0, 17, 17, 18, 90};
    check_result(run_case(p, W, off.back(), true, rng, nm.grouped, off, 0, 0, -1, true), tag + " grouped");
  }
}

}  // namespace

// The native block-scaled MMA path (".mx") runs only on sm_120a. Unverified: it has never run on hardware (no
// such device was available), so the case skips everywhere else; KTUNE_TEST_REQUIRE=sm_120a makes that a failure.
TEST_CASE("mxfp4_gemm native block-scaled MMA (.mx, sm_120a, unverified: never run on hardware) against the "
          "MXFP8-activation reference",
          "[gpu][mxfp4][unverified]") {
  KTUNE_REQUIRE_GPU();
  const Arch arch = runtime().current_arch();
  KTUNE_GATE("sm_120a", arch.sm() == 120 && arch.suffix == 'a',
             ".mx needs an sm_120a device, this one is " << arch.str());
  std::mt19937_64 rng(run_seed() + 3);
  NativeMatrix nm;
  nm.tag = "mx";
  nm.configs = {"bm8.tn2.wn1.wk8.s0.d2.mx", "bm16.tn4.wn1.wk8.s3.d2.mx", "bm16.tn2.wn4.wk1.s3.d2.mx",
                "bm32.tn2.wn4.wk1.s3.d2.mx", "bm64.tn2.wn4.wk1.s4.d2.mx"};
  nm.m1 = nm.configs[0];
  nm.big = nm.configs[1];
  nm.big_m = 16;
  nm.fp16 = nm.configs[3];
  nm.grouped = nm.configs[2];
  check_native_matrix(nm, rng);
}

// The tensor-memory block-scaled MMA path (".tc", kernel_tc.cuh) runs only on sm_100a. Unverified: it has never
// run on hardware (no such device was available), so the case skips elsewhere (KTUNE_TEST_REQUIRE=sm_100a makes
// that a failure). It is written to run as is on one:
// the native matrix with every tile width, and a NaN scale (its column must be NaN, the others exact: what OCP
// asks of 0xFF, not yet seen on the hardware).
TEST_CASE("mxfp4_gemm tensor-memory block-scaled MMA (.tc, sm_100a, unverified: never run on hardware) against "
          "the MXFP8-activation reference",
          "[gpu][mxfp4][unverified]") {
  KTUNE_REQUIRE_GPU();
  const Arch arch = runtime().current_arch();
  KTUNE_GATE("sm_100a", arch.sm() == 100 && arch.suffix == 'a',
             ".tc needs an sm_100a device, this one is " << arch.str());
  std::mt19937_64 rng(run_seed() + 4);
  NativeMatrix nm;
  nm.tag = "tc";
  nm.configs = {"bm16.tn2.wn4.wk1.s2.d1.tc", "bm32.tn2.wn4.wk1.s2.d1.tc", "bm64.tn2.wn4.wk1.s2.d1.tc",
                "bm128.tn2.wn4.wk1.s2.d1.tc"};
  nm.m1 = nm.configs[0];
  nm.big = nm.configs[3];
  nm.big_m = 1000;
  nm.fp16 = nm.configs[2];
  nm.grouped = nm.configs[0];
  check_native_matrix(nm, rng);
  const Weight W = make_weight(kSmall.n, kSmall.k, 1, rng, 37, 1);  // scale 0xFF at (row 37, block 1)
  check_result(run_case(kSmall, W, 16, true, rng, nm.configs[0], {}, 0, 0, 37, true), "tc NaN scale m 16");
}

TEST_CASE("precompile the mxfp4_gemm test kernels", "[.][mxfp4_precompile]") {
  const char* a = std::getenv("KTUNE_MXFP4_ARCH");
  const Arch arch = Arch::parse(a ? a : "sm_90a");
  Runtime& rt = runtime();
  std::vector<test::PrecompileJob> jobs;
  std::set<std::string> sources;  // one job per distinct binary
  auto add = [&](const Problem& p, const Config& c) {
    const GeneratedKernel g = generate(p, c, arch);
    if (sources.insert(g.source).second) jobs.push_back({g.config_key, [g] { return g; }});
  };
  // Every search-space config (the binary depends on the dtypes, dense or grouped, and the config only).
  for (const Problem& p : {kSmall, problem(100, 96, 5, 2), problem(2880, 2880, 1, 1, kc::kFP16), kSmallFp16,
                           problem(100, 96, 8, 2, kc::kFP16), kSmall40}) {
    for (const Config& c : search_space(p, arch)) add(p, c);
  }
  // The launch's defaults. The hint is dense rows or grouped rows per expert (launch.cpp: the bucket times top_k
  // over the experts, a power of two wherever a GPU test takes a grouped default: there experts / top_k is too).
  std::vector<Problem> defaults = {problem(8192, 8192), problem(5760, 2880), problem(2880, 2880),
                                   problem(5760, 2880, 8, 2), problem(2880, 2880, 1, 1, kc::kFP16), problem(100, 96),
                                   problem(100, 96, 5, 2), problem(100, 96, 8, 2), kMoe128};
  for (const auto& d : kMixedDtypes) {
    defaults.push_back(mixed_dense(d));
    defaults.push_back(mixed_grouped(d));
  }
  for (const Problem& p : defaults)
    for (int64_t m : {1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096}) add(p, default_config(p, arch, m));
  int compiled = 0, failed = 0;
  test::precompile_jobs(rt, jobs, arch, &compiled, &failed);
  std::printf("mxfp4 precompile: %zu kernels for %s, %d compiled, %d failed\n", jobs.size(), arch.str().c_str(),
              compiled, failed);
  CHECK(failed == 0);
}

// The GPU half of the host-backend oracle (tests/support/family_oracle.hpp): records this kernel's outputs of
// the fixed oracle cases for `[host][oracle]`. KTUNE_ORACLE_OUT=path.
TEST_CASE("mxfp4_gemm outputs for the host-backend oracle", "[.][mxfp4_oracle_dump]") {
  KTUNE_REQUIRE_GPU();
  const char* path = std::getenv("KTUNE_ORACLE_OUT");
  REQUIRE(path != nullptr);
  test::OracleFile file;
  const char* header = std::getenv("KTUNE_ORACLE_HEADER");
  file.header = header ? header : "mxfp4_gemm GPU outputs";
  const uint64_t base = run_seed();
  uint64_t i = 0;
  for (const test::Mxfp4OracleCase& oc : test::mxfp4_oracle_cases()) {
    const uint64_t seed = base + 1000 * (++i);
    const Problem& p = oc.problem;
    const test::Mxfp4OracleInputs in = test::make_mxfp4_oracle_inputs(oc, seed);
    std::vector<uint8_t> pw(packed_weight_bytes(p.n, p.k, p.num_experts)), ps(packed_scale_bytes(p.n, p.k, p.num_experts));
    prepack_host(in.w.data(), in.s.data(), p.n, p.k, p.num_experts, pw.data(), ps.data());
    test::DeviceBuffer dw(pw.size()), dsc(ps.size()), da(in.a.size() * 2), db(in.bias.size() * 2),
        dc(size_t(std::max(oc.m, 1)) * p.n * 2), doff(std::max<size_t>(oc.offsets.size(), 1) * 4);
    dw.upload(pw);
    dsc.upload(ps);
    da.upload(in.a);
    db.upload(in.bias);
    if (!oc.offsets.empty()) doff.upload(oc.offsets);
    dc.poison();
    Mxfp4GemmArgs args;
    args.a = da.as<void>();
    args.weight = Mxfp4Weight{packed_layout_version(), p.n, p.k, p.num_experts, dw.as<void>(), dsc.as<void>()};
    args.bias = oc.bias ? db.as<void>() : nullptr;
    args.c = dc.as<void>();
    args.m = oc.m;
    args.expert_offsets = oc.offsets.empty() ? nullptr : doff.as<int32_t>();
    mxfp4_gemm(runtime(), p, args, nullptr);
    test::sync();
    const Mxfp4GemmPlan plan = mxfp4_gemm_plan(runtime(), p, oc.m);
    test::OracleRecord rec;
    rec.name = oc.name;
    rec.problem_key = p.key();
    rec.config = plan.config;
    rec.seed = seed;
    rec.input_digest = test::mxfp4_input_digest(in);
    rec.out = dc.download<unsigned char>(size_t(oc.m) * p.n * 2);
    // The exact reference, as a sanity check of the recording (the full check is the [gpu][mxfp4] suite).
    const std::vector<double> ref = test::mxfp4_oracle_reference(oc, in);
    double e2 = 0, r2 = 0;
    int64_t nan_mismatch = 0;
    for (size_t j = 0; j < ref.size(); ++j) {
      const uint16_t bits = reinterpret_cast<const uint16_t*>(rec.out.data())[j];
      const double got = p.out_dtype == kc::kBF16 ? kc::bf16_to_float(bits) : kc::fp16_to_float(bits);
      if (std::isnan(ref[j]) || std::isnan(got)) {
        nan_mismatch += std::isnan(ref[j]) != std::isnan(got);
        continue;
      }
      e2 += (got - ref[j]) * (got - ref[j]);
      r2 += ref[j] * ref[j];
    }
    const double rel = r2 > 0 ? std::sqrt(e2 / r2) : std::sqrt(e2);
    INFO(oc.name << ": rel " << rel << ", NaN mismatches " << nan_mismatch);
    CHECK(rel < 5e-3);
    CHECK(nan_mismatch == 0);
    std::printf("  %-28s %-32s %-24s m %4d rel %.2e\n", oc.name.c_str(), rec.problem_key.c_str(), plan.config.c_str(),
                oc.m, rel);
    file.records.push_back(std::move(rec));
  }
  test::write_oracle_file(path, file);
  std::printf("oracle: %zu GPU outputs written to %s\n", file.records.size(), path);
}
