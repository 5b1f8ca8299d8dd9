// mxfp4_gemm on the host CPU (the LLVM backend JIT-compiling templates/mxfp4_gemm/host_kernel.h) against the
// exact reference the GPU tests use (support/mxfp4_reference.hpp), through the engine call
// ktune::mxfp4_gemm_host with the GPU call's argument struct and prepacked weights.
//
// The GPU matrix at small sizes: M {1, 7, 16, 64} x (N, K) {(100, 96), (200, 320), (72, 1056)} (N not a multiple
// of any N tile, K not a multiple of 64 or of any K step) x bias on/off; fp16 activations and outputs (and fp16
// in / bf16 out); padded lda / ldc; grouped (MoE) with uneven and empty experts, all rows in the last expert, and a
// bad offsets table (clamped like the device does); NaN scales; every host config of the search space on one
// shape, at M crossing the 64-row slab. Data are fresh every run (seed printed; KTUNE_TEST_SEED=<seed> replays),
// never zero; outputs are poisoned with NaN before each call, and every element must be written.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "autotune/presets.hpp"
#include "autotune/warmup.hpp"
#include "common/numerics.cuh"
#include "host/host_support.hpp"
#include "ktune/error.hpp"
#include "ktune/mxfp4_gemm_host.hpp"
#include "support/cache_file.hpp"
#include "support/mxfp4_reference.hpp"
#include "support/seed.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
using namespace ktune::mxfp4;
namespace kc = ::ktune_common;

namespace {

// One runtime (and temporary cache) for the whole file, so a kernel is compiled once for all test cases.
Runtime& host_runtime() {
  static test::TempDir dir;
  static Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  return rt;
}

// One seed for the whole run (printed by whichever test draws it first); each test offsets it.
uint64_t seed() {
  static const uint64_t s = test::run_seed("[host][mxfp4]");
  return s;
}

Problem problem(int n, int k, int e = 1, int top_k = 1, DType a = kc::kBF16, DType out = kc::kBF16) {
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

struct Case {
  int m = 1;
  bool bias = false;
  const char* config = nullptr;
  std::vector<int> offsets;        // passed to the call (grouped)
  std::vector<int> check_offsets;  // what the reference uses (default: offsets)
  int lda_pad = 0, ldc_pad = 0, nan_col = -1, threads = 0;
};

test::Mxfp4Check run_case(const Problem& p, const test::Mxfp4TestWeight& W, const Case& cs, std::mt19937_64& rng,
                          std::string* config_used) {
  Runtime& rt = host_runtime();
  const int lda = p.k + cs.lda_pad, ldc = p.n + cs.ldc_pad, m = cs.m;
  const std::vector<uint16_t> a = test::random_16bit(size_t(std::max(m, 1)) * lda, p.a_dtype, 1.f, rng);
  const std::vector<uint16_t> b = test::random_16bit(size_t(p.num_experts) * p.n, p.out_dtype, 4.f, rng);
  std::vector<uint16_t> c(size_t(std::max(m, 1)) * ldc, 0xFFFF);  // NaN in bf16 and fp16
  std::vector<int32_t> off(cs.offsets.begin(), cs.offsets.end());
  Mxfp4GemmArgs args;
  args.a = a.data();
  args.lda = cs.lda_pad ? lda : 0;
  args.weight = Mxfp4Weight{packed_layout_version(), p.n, p.k, p.num_experts, W.packed.data(), W.packed_scales.data()};
  args.bias = cs.bias ? b.data() : nullptr;
  args.c = c.data();
  args.ldc = cs.ldc_pad ? ldc : 0;
  args.m = m;
  args.expert_offsets = off.empty() ? nullptr : off.data();
  args.config = cs.config;
  *config_used = mxfp4_gemm_host_plan(rt, p, m, cs.threads, cs.config).config;
  mxfp4_gemm_host(rt, p, args, cs.threads);
  const std::vector<int>& ref_off = cs.check_offsets.empty() ? cs.offsets : cs.check_offsets;
  return test::mxfp4_check(p, W, a, lda, cs.bias ? b.data() : nullptr, c, ldc, m, ref_off, cs.nan_col,
                           test::mxfp4_rows_to_check(m, rng));
}

void check(const Problem& p, const test::Mxfp4TestWeight& W, const Case& cs, std::mt19937_64& rng,
           const std::string& what) {
  std::string cfg;
  const test::Mxfp4Check r = run_case(p, W, cs, rng, &cfg);
  INFO(p.key() << " / " << cfg << " " << what << " m " << cs.m << (cs.bias ? " bias" : "") << ": rel " << r.rel
               << ", bad " << r.bad << " of " << r.checked << ", unwritten " << r.unwritten
               << (r.first_bad.empty() ? "" : ", first: " + r.first_bad) << " (seed " << seed() << ")");
  CHECK(r.checked > 0);
  CHECK(r.unwritten == 0);
  CHECK(r.bad == 0);
  CHECK(r.rel < 5e-3);
}

Arch host_arch() { return Arch::host_cpu(); }

}  // namespace

TEST_CASE("host mxfp4_gemm matches the exact reference (the GPU matrix, small)", "[host][mxfp4]") {
  KTUNE_REQUIRE_HOST();
  std::mt19937_64 rng(seed());
  struct NK {
    int n, k;
  };
  for (const NK s : {NK{100, 96}, NK{200, 320}, NK{72, 1056}}) {
    const Problem p = problem(s.n, s.k);
    const test::Mxfp4TestWeight W = test::make_mxfp4_weight(s.n, s.k, 1, rng);
    for (int m : {1, 7, 16, 64})
      for (bool bias : {false, true}) {
        Case cs;
        cs.m = m;
        cs.bias = bias;
        check(p, W, cs, rng, "dense");
      }
  }
  {
    const Problem p = problem(100, 96);
    const test::Mxfp4TestWeight W = test::make_mxfp4_weight(p.n, p.k, 1, rng);
    Case cs;
    cs.m = 45;
    cs.bias = true;
    cs.lda_pad = 24;
    cs.ldc_pad = 5;
    check(p, W, cs, rng, "lda/ldc padded");
    cs.threads = 1;
    check(p, W, cs, rng, "one thread");
    cs.threads = 3;
    check(p, W, cs, rng, "three threads");
  }
  for (const DType out : {kc::kFP16, kc::kBF16}) {
    const Problem p = problem(200, 320, 1, 1, kc::kFP16, out);
    const test::Mxfp4TestWeight W = test::make_mxfp4_weight(p.n, p.k, 1, rng);
    for (int m : {7, 64}) {
      Case cs;
      cs.m = m;
      cs.bias = m == 7;
      check(p, W, cs, rng, "fp16 activations");
    }
  }
}

TEST_CASE("host mxfp4_gemm: every host config of the search space, NaN scales", "[host][mxfp4]") {
  KTUNE_REQUIRE_HOST();
  std::mt19937_64 rng(seed() + 1);
  const Problem p = problem(100, 96);
  const auto space = search_space(p, host_arch());
  REQUIRE(space.size() >= 6);
  CHECK(space.front() == default_config(p, host_arch()));
  const test::Mxfp4TestWeight W = test::make_mxfp4_weight(p.n, p.k, 1, rng);
  for (const Config& c : space) {
    const std::string key = c.key();
    for (int m : {1, 37, 130}) {  // 130: three slabs of at most 64 rows, a ragged last register block
      Case cs;
      cs.m = m;
      cs.bias = m != 37;
      cs.config = key.c_str();
      check(p, W, cs, rng, "config " + key);
    }
  }
  // NaN scale (0xFF) at (row 37, block 1): column 37 of C is NaN for every row; everything else exact.
  const test::Mxfp4TestWeight Wn = test::make_mxfp4_weight(p.n, p.k, 1, rng, 37, 1);
  for (int m : {1, 16, 200}) {
    Case cs;
    cs.m = m;
    cs.bias = true;
    cs.nan_col = 37;
    check(p, Wn, cs, rng, "NaN scale");
  }
}

TEST_CASE("host mxfp4_gemm grouped (MoE): uneven and empty experts", "[host][mxfp4]") {
  KTUNE_REQUIRE_HOST();
  std::mt19937_64 rng(seed() + 2);
  {
    const Problem p = problem(200, 320, 8, 2);
    const test::Mxfp4TestWeight W = test::make_mxfp4_weight(p.n, p.k, p.num_experts, rng);
    for (int hint : {8, 64, 150}) {
      std::vector<int> off = test::mxfp4_random_offsets(p.num_experts, hint, rng);
      off[1] = off[0];  // expert 0 empty
      for (size_t e = 1; e < off.size(); ++e) off[e] = std::max(off[e], off[e - 1]);
      Case cs;
      cs.m = off.back();
      cs.bias = hint != 64;
      cs.offsets = off;
      check(p, W, cs, rng, "grouped rows " + std::to_string(cs.m));
    }
  }
  {
    const Problem p = problem(100, 96, 5, 2);
    const test::Mxfp4TestWeight W = test::make_mxfp4_weight(p.n, p.k, p.num_experts, rng);
    for (const char* cfg : {"bm4.tn2.kt4", "bm1.tn4.kt4", "bm8.tn1.kt4"}) {
      Case cs;
      cs.offsets = {0, 0, 17, 17, 18, 90};  // empty, 17, empty, 1, 72
      cs.m = 90;
      cs.bias = true;
      cs.config = cfg;
      check(p, W, cs, rng, std::string("grouped small ") + cfg);
    }
    Case last;
    last.offsets = {0, 0, 0, 0, 0, 33};  // all rows in the last expert
    last.m = 33;
    check(p, W, last, rng, "grouped last expert only");
    Case nothing;
    nothing.offsets = {0, 0, 0, 0, 0, 0};
    nothing.m = 0;
    std::string cfg;
    std::vector<uint16_t> dummy(8);
    Mxfp4GemmArgs a;
    a.a = dummy.data();
    a.c = dummy.data();
    a.weight = Mxfp4Weight{packed_layout_version(), p.n, p.k, p.num_experts, W.packed.data(), W.packed_scales.data()};
    std::vector<int32_t> zero(6, 0);
    a.expert_offsets = zero.data();
    a.m = 0;
    mxfp4_gemm_host(host_runtime(), p, a, 0);  // m = 0: nothing to do, nothing written
    CHECK(dummy[0] == 0);
    // A bad table (negative, decreasing, past m) is refused naming the first bad entry: the offsets are host
    // memory, so the host call checks them before any row is read or written.
    const std::vector<std::pair<std::vector<int32_t>, std::string>> bad_tables = {
        {{-5, 50, 50, 60, 60, 60}, "expert_offsets[0]: expected a row offset in [0, 60]"},
        {{0, 50, 20, 60, 60, 60}, "expert_offsets[2]: expected a row offset in [50, 60]"},
        {{0, 10, 20, 200, 200, 200}, "expert_offsets[3]: expected a row offset in [20, 60]"}};
    for (const auto& [table, message] : bad_tables) {
      a.m = 60;
      a.expert_offsets = table.data();
      CHECK_THROWS_WITH(mxfp4_gemm_host(host_runtime(), p, a, 0), Catch::Contains(message));
      CHECK(dummy[0] == 0);
    }
  }
}

TEST_CASE("host mxfp4_gemm: plan sources and bad arguments naming the field", "[host][mxfp4]") {
  KTUNE_REQUIRE_HOST();
  Runtime& rt = host_runtime();
  const Problem p = problem(100, 96, 5, 2);
  std::mt19937_64 rng(seed() + 3);
  const test::Mxfp4TestWeight W = test::make_mxfp4_weight(p.n, p.k, p.num_experts, rng);

  const Mxfp4HostPlan d = mxfp4_gemm_host_plan(rt, p, 40);
  CHECK(d.source == "default");
  CHECK(d.config == default_config(p, host_arch()).key());
  CHECK(d.tuning_key == mxfp4_gemm_plan(rt, p, 40, "bm16.tn1.wn4.wk2.s3.d4").tuning_key);  // the GPU key
  rt.remember_host_tuned_config("mxfp4_gemm", d.tuning_key, "bm8.tn1.kt4");
  const Mxfp4HostPlan t = mxfp4_gemm_host_plan(rt, p, 40);
  CHECK(t.source == "tuned");
  CHECK(t.config == "bm8.tn1.kt4");
  // Row counts past int32 are refused as the GPU plan refuses them, not folded into a wrapped tuning key.
  CHECK_THROWS_WITH(mxfp4_gemm_host_plan(rt, p, int64_t{INT32_MAX} + 1),
                    Catch::Contains("m: expected >= 0 rows (at most 2^31 - 1), got 2147483648"));
  CHECK_THROWS_WITH(mxfp4_gemm_host_plan(rt, p, INT64_MAX), Catch::Contains("at most 2^31 - 1"));

  std::vector<uint16_t> a(size_t(20) * p.k, 0x3F80), c(size_t(20) * p.n);
  std::vector<int32_t> off = {0, 4, 8, 12, 16, 20};
  Mxfp4GemmArgs good;
  good.a = a.data();
  good.c = c.data();
  good.m = 20;
  good.weight = Mxfp4Weight{packed_layout_version(), p.n, p.k, p.num_experts, W.packed.data(), W.packed_scales.data()};
  good.expert_offsets = off.data();
  mxfp4_gemm_host(rt, p, good, 1);
  auto expect_field = [&](Mxfp4GemmArgs bad, const char* field) {
    try {
      mxfp4_gemm_host(rt, p, bad, 1);
      FAIL("expected invalid_argument for " << field);
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains(field));
    }
  };
  Mxfp4GemmArgs b = good;
  b.a = nullptr;
  expect_field(b, "a:");
  b = good;
  b.c = nullptr;
  expect_field(b, "c:");
  b = good;
  b.weight.layout_version = 99;
  expect_field(b, "weight.layout_version");
  b = good;
  b.weight.n = 96;
  expect_field(b, "weight.n");
  b = good;
  b.weight.packed = nullptr;
  expect_field(b, "weight.packed");
  b = good;
  b.expert_offsets = nullptr;
  expect_field(b, "expert_offsets");
  b = good;
  b.lda = 50;
  expect_field(b, "lda");
  b = good;
  b.m = -1;
  expect_field(b, "m:");
  b = good;
  b.config = "bm16.tn1.wn4.wk2.s3.d4";  // a CUDA config
  expect_field(b, "config");
  b = good;
  b.config = "bm3.tn2.kt4";
  expect_field(b, "config");
  b = good;
  b.config = "bm8.tn4.kt4";  // bm * tn > 16
  expect_field(b, "config");
}

TEST_CASE("host warmup tunes gpt-oss's MoE keys, a second runtime replays them with 0 compiles", "[host][mxfp4][warmup]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("w.db");
  // gpt-oss-120b's two MXFP4 ops (moe.gate_up n5760.k2880, moe.down n2880.k2880; 128 experts, top 4) at 1
  // token (CI time); its attention ops are xqa_decode's and are covered by test_host_runtime.cpp.
  autotune::Preset preset = autotune::with_overrides(autotune::load_preset("gpt-oss-120b"), std::nullopt, 1, 512, std::nullopt);
  preset.ops.erase(std::remove_if(preset.ops.begin(), preset.ops.end(),
                                  [](const autotune::PresetOp& op) { return op.family != "mxfp4_gemm"; }),
                   preset.ops.end());
  REQUIRE(preset.ops.size() == 2);
  autotune::WarmupOptions w;
  w.arches = {"host"};
  int keys = 0;
  {
    Runtime rt(o);
    const auto r = autotune::warmup(rt, preset, w);
    CHECK(r.failed == 0);
    CHECK(r.compile_failed == 0);
    CHECK(r.keys == 2);  // 2 ops x tokens {1}
    CHECK(r.tuned == 2);
    for (const auto& it : r.items) {
      INFO(it.tuning_key << ": " << it.status);
      CHECK(it.status == "tuned");
      CHECK(Config::from_key(it.winner).host());
    }
    keys = r.keys;
  }
  {
    Runtime again(o);
    const auto r = autotune::replay(again, preset, w.host_max_total_tokens, true, "host");
    CHECK(r.ops.size() == static_cast<size_t>(keys));
    CHECK(r.stats.compiles == 0);
    CHECK(r.tunings == 0);
    CHECK(r.stats.tuning_misses == 0);
    for (const auto& op : r.ops) {
      INFO(op.tuning_key);
      CHECK(op.tuned);
    }
  }
  // The host cap (WarmupOptions::host_max_gemm_tokens): keys above it are skipped, saying why; the rest were done.
  autotune::Preset big = autotune::with_overrides(preset, std::nullopt, 8, 512, std::nullopt);
  Runtime third(o);
  autotune::WarmupOptions w2 = w;
  w2.all_candidates = false;
  w2.host_max_gemm_tokens = 1;
  const auto r = autotune::warmup(third, big, w2);
  int capped = 0;
  for (const auto& it : r.items) capped += it.status.find("GEMM tokens above 1") != std::string::npos;
  CHECK(capped == 6);  // tokens {2, 4, 8} x 2 ops
  CHECK(r.already_done == keys);
  CHECK(r.tuned == 0);
}
