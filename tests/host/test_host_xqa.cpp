// xqa_decode on the host CPU (the LLVM backend JIT-compiling templates/xqa_decode/host_kernel.h) against the
// fp64 CPU reference, through the engine call ktune::xqa_decode_host.
//
// The kernels are a fixed, seeded sample of the matrix (head_dim 64/128/256, GQA 1/4/8 (+2, 16), page 16/32
// (+64, 128), HND/NHD, bf16/fp16/e4m3 KV (+ e4m3 Q, e4m3 output), q_len 1/2/4/7 (+16; draft trees 17, 33,
// 48, 64: two mask words a row, and up to 1024 rows a kv head in 256-row groups), uniform/ragged,
// none/causal/explicit masks, sinks, window, softcap, LSE, host configs, planned and forced split counts); the
// data are fresh every run (seed printed; KTUNE_TEST_SEED=<seed> replays): seq_lens not page-aligned,
// zero-length padding requests, shuffled block tables, NaN-filled unused pages and page tails, outputs and
// LSE poisoned with 0xFF (NaN) bytes — a row that must not be written must keep them, a row that must be
// written must have none left.
//
// Tolerances (the host kernel keeps fp32 scores, probabilities and accumulators; what is left is the output
// rounding): relative L2 < 5e-3 for bf16/fp16 outputs, 8e-2 for e4m3 outputs (3 mantissa bits); every row
// < 5x that; |LSE - ref| < 2e-3.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "common/numerics.cuh"
#include "host/host_support.hpp"
#include "ktune/error.hpp"
#include "ktune/tuning.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "support/cache_file.hpp"
#include "support/seed.hpp"
#include "support/temp_dir.hpp"
#include "support/xqa_forms.hpp"
#include "support/xqa_reference.hpp"

using namespace ktune;
using namespace ktune::xqa;
namespace kc = ::ktune_common;

namespace {

struct HostCombo {
  std::string name;
  Problem p;
  std::string config;  // empty: the launch's (default) config
  int batch = 4, max_seq_len = 700, ragged = -1, forced_splits = 0, window_left = 64, threads = 0;
  double zero_fraction = -1;
};

constexpr auto make_problem = test::make_xqa_problem;

// Fixed list (never changes between runs), small enough for CI: every listed value appears at least once.
std::vector<HostCombo> combos() {
  const DType BF = kc::kBF16, FP = kc::kFP16, E4 = kc::kE4M3;
  const Layout H = Layout::Hnd, N = Layout::Nhd;
  const MaskKind NO = MaskKind::None, CA = MaskKind::Causal, EX = MaskKind::Explicit;
  std::vector<HostCombo> v;
  auto add = [&](const char* name, Problem p, std::string cfg, std::function<void(HostCombo&)> knobs) {
    HostCombo c;
    c.name = name;
    c.p = p;
    c.config = std::move(cfg);
    knobs(c);
    v.push_back(c);
  };
  auto none = [](HostCombo&) {};
  add("d128_g4_p32_hnd_bf16_q1", make_problem(128, 32, 8, 32, H, BF, BF, BF, 1, NO, false, false, false, false), "", none);
  add("d128_g4_p16_nhd_fp16_q2_causal", make_problem(128, 16, 4, 16, N, FP, FP, FP, 2, CA, false, false, false, true), "", none);
  add("d64_g1_p16_hnd_e4m3_q4_mask_sink", make_problem(64, 4, 4, 16, H, BF, E4, BF, 4, EX, true, false, false, true), "", none);
  add("d64_g8_p32_nhd_bf16_q7_causal_win", make_problem(64, 16, 2, 32, N, BF, BF, BF, 7, CA, false, true, false, true), "",
      [](HostCombo& c) { c.window_left = 40; });
  add("d128_g8_p32_hnd_e4m3_q7_mask_ragged", make_problem(128, 8, 1, 32, H, FP, E4, FP, 7, EX, false, false, false, true), "",
      [](HostCombo& c) { c.ragged = 1; c.zero_fraction = 0.3; });
  add("d128_g1_p16_nhd_fp16_q4_causal_sink_win_ragged", make_problem(128, 2, 2, 16, N, FP, FP, FP, 4, CA, true, true, false, true), "",
      [](HostCombo& c) { c.ragged = 1; c.window_left = 0; });
  add("d64_g4_p32_hnd_e4m3q_e4m3out_q1", make_problem(64, 8, 2, 32, H, E4, E4, E4, 1, NO, false, false, false, false), "", none);
  add("d128_g4_p16_hnd_bf16_q4_softcap_split", make_problem(128, 8, 2, 16, H, BF, BF, BF, 4, CA, true, false, true, true), "t32.v16.u1",
      [](HostCombo& c) { c.forced_splits = 5; c.max_seq_len = 2000; });
  add("d256_g2_p64_nhd_bf16_q2_mask_e4m3out", make_problem(256, 4, 2, 64, N, BF, BF, E4, 2, EX, true, true, false, true), "t16.v4.u2",
      [](HostCombo& c) { c.window_left = 100; });
  add("d64_g16_p128_hnd_fp16_q16_mask_ragged_split", make_problem(64, 16, 1, 128, H, FP, FP, FP, 16, EX, false, false, false, true), "t128.v8.u4",
      [](HostCombo& c) { c.ragged = 1; c.forced_splits = 3; c.zero_fraction = 0.25; c.max_seq_len = 900; });
  add("d128_g4_p32_hnd_bf16_q1_planned_split", make_problem(128, 8, 2, 32, H, BF, BF, BF, 1, NO, false, false, false, true), "",
      [](HostCombo& c) { c.batch = 1; c.max_seq_len = 4000; c.threads = 8; });  // 2 items on 8 threads: splits
  add("uniform_padding_e4m3", make_problem(128, 16, 4, 32, H, BF, E4, BF, 4, CA, false, false, false, true), "",
      [](HostCombo& c) { c.ragged = 0; c.zero_fraction = 0.5; c.batch = 6; });
  // draft trees: q_len 17..64 (explicit masks of one and two words a row; 1024 rows a kv head = 4 row groups)
  add("d128_g4_p32_hnd_bf16_q17_causal", make_problem(128, 16, 4, 32, H, BF, BF, BF, 17, CA, false, false, false, true), "",
      [](HostCombo& c) { c.ragged = 0; c.batch = 3; c.max_seq_len = 400; });
  add("d64_g8_p16_nhd_fp16_q33_mask_ragged", make_problem(64, 16, 2, 16, N, FP, FP, FP, 33, EX, false, false, false, true), "",
      [](HostCombo& c) { c.ragged = 1; c.zero_fraction = 0.3; c.batch = 5; c.max_seq_len = 300; });
  add("d128_g2_p32_hnd_e4m3_q64_mask_sink_win", make_problem(128, 4, 2, 32, H, BF, E4, BF, 64, EX, true, true, false, true), "",
      [](HostCombo& c) { c.ragged = 0; c.batch = 3; c.max_seq_len = 500; c.window_left = 40; });
  add("d64_g16_p64_nhd_bf16_q64_causal_ragged_split", make_problem(64, 16, 1, 64, N, BF, BF, BF, 64, CA, false, false, false, true), "t32.v8.u4",
      [](HostCombo& c) { c.ragged = 1; c.zero_fraction = 0.3; c.batch = 4; c.forced_splits = 3; c.max_seq_len = 400; });
  add("d64_g16_p16_hnd_fp16_q64_mask_uniform_padding", make_problem(64, 32, 2, 16, H, FP, FP, FP, 64, EX, true, false, false, true), "",
      [](HostCombo& c) { c.ragged = 0; c.zero_fraction = 0.4; c.batch = 3; c.max_seq_len = 300; });
  add("d128_g1_p16_hnd_bf16_q48_mask_ragged_cap_split", make_problem(128, 2, 2, 16, H, BF, BF, BF, 48, EX, false, false, true, true), "",
      [](HostCombo& c) { c.ragged = 1; c.zero_fraction = 0.25; c.batch = 4; c.forced_splits = 2; c.max_seq_len = 600; });
  add("all_padding_ragged", make_problem(64, 8, 2, 16, N, BF, BF, BF, 2, CA, false, false, false, true), "",
      [](HostCombo& c) { c.ragged = 1; c.zero_fraction = 1.0; c.forced_splits = 2; });
  return v;
}

void run_combo(Runtime& rt, const HostCombo& cb, uint64_t seed) {
  test::XqaRandomOptions o;
  o.batch = cb.batch;
  o.max_seq_len = cb.max_seq_len;
  o.seed = seed;
  o.window_left = cb.window_left;
  test::SplitMix pick(seed ^ 0x51ED2701u);
  o.ragged = cb.ragged >= 0 ? cb.ragged == 1 : pick.uniform() < 0.5;
  o.zero_fraction = cb.zero_fraction >= 0 ? cb.zero_fraction : 0.2;
  const test::XqaRandomCase c = test::make_xqa_case(cb.p, o);

  const Problem& p = cb.p;
  const size_t rows = size_t(c.num_tokens) * p.num_q_heads;
  const unsigned char poison = 0xFF;
  std::vector<unsigned char> out(std::max<size_t>(rows * p.head_dim * kc::dtype_size(int(p.out_dtype)), 1), poison);
  std::vector<float> lse(std::max<size_t>(rows, 1));
  std::memset(lse.data(), poison, lse.size() * sizeof(float));

  XqaDecodeArgs a = test::host_args(c, out.data(), lse.data());
  if (!cb.config.empty()) a.config = cb.config.c_str();
  a.num_splits = cb.forced_splits;
  const XqaHostPlan plan = xqa_decode_host_plan(rt, p, a.batch, a.max_seq_len, cb.threads, a.config, a.num_splits);
  INFO(cb.name << ": " << p.key() << " / " << plan.config << " (" << plan.source << "), splits " << plan.num_splits
               << ", threads " << plan.threads << ", batch " << c.batch << ", tokens " << c.num_tokens << ", "
               << (o.ragged ? "ragged" : "uniform") << ", seed " << seed);
  xqa_decode_host(rt, p, a, cb.threads);

  const test::XqaRefResult ref = test::xqa_reference(p, c.host_params());
  const test::XqaCompare cmp = test::xqa_compare(p, ref, out.data(), p.write_lse ? lse.data() : nullptr, poison);
  const double tol = p.out_dtype == kc::kE4M3 ? 8e-2 : 5e-3;
  CHECK(cmp.nonfinite == 0);
  CHECK(cmp.clobbered == 0);
  CHECK(cmp.rel_l2 < tol);
  CHECK(cmp.max_row_rel < 5 * tol);
  if (p.write_lse) CHECK(cmp.lse_max_abs < 2e-3);
  if (cb.forced_splits > 0) CHECK(plan.num_splits == cb.forced_splits);
}

// One case through the engine forms (support/xqa_forms.hpp): the same data as the dense case, so the dense
// reference applies; out rows gathered back, their padding checked untouched.
void run_forms(Runtime& rt, const Problem& p, test::XqaKvForm form, bool head_major_q, int forced_splits,
               const char* config, uint64_t seed) {
  test::XqaRandomOptions o;
  o.batch = 3;
  o.max_seq_len = 500;
  o.seed = seed;
  o.ragged = seed % 2 == 0;
  o.zero_fraction = 0.2;
  const test::XqaRandomCase c = test::make_xqa_case(p, o);
  test::XqaForms f = test::make_xqa_forms(c, form, head_major_q);
  std::vector<float> lse(std::max<size_t>(size_t(c.num_tokens) * p.num_q_heads, 1));
  std::memset(lse.data(), 0xFF, lse.size() * sizeof(float));
  XqaDecodeArgs a = test::host_args(c, nullptr, lse.data());
  test::set_xqa_forms(a, c, f, f.q.data(), f.out.data(), f.kv.data(), f.scale_values);
  a.num_splits = forced_splits;
  a.config = config;
  INFO(p.key() << ", kv form " << int(form) << (head_major_q ? ", head-major q" : ", fused-QKV q") << ", splits "
                << forced_splits << ", tokens " << c.num_tokens << ", seed " << seed);
  xqa_decode_host(rt, p, a, 4);

  long long pad_clobbered = 0;
  const std::vector<unsigned char> dense = test::gather_xqa_out(c, f, f.out, &pad_clobbered);
  const test::XqaRefResult ref = test::xqa_reference(p, c.host_params());
  const test::XqaCompare cmp = test::xqa_compare(p, ref, dense.data(), p.write_lse ? lse.data() : nullptr, 0xFF);
  const double tol = p.out_dtype == kc::kE4M3 ? 8e-2 : 5e-3;
  CHECK(pad_clobbered == 0);
  CHECK(cmp.nonfinite == 0);
  CHECK(cmp.clobbered == 0);
  CHECK(cmp.rel_l2 < tol);
  CHECK(cmp.max_row_rel < 5 * tol);
  if (p.write_lse) CHECK(cmp.lse_max_abs < 2e-3);
}

}  // namespace

TEST_CASE("host xqa_decode matches the fp64 reference over the matrix", "[host][xqa]") {
  KTUNE_REQUIRE_HOST();
  const uint64_t seed = test::run_seed("[host][xqa]");
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  const auto list = combos();
  for (size_t i = 0; i < list.size(); ++i) run_combo(rt, list[i], seed + 1000003ull * i);
}

TEST_CASE("host xqa_decode: every config of the search space gives the same answer", "[host][xqa]") {
  KTUNE_REQUIRE_HOST();
  const uint64_t seed = test::run_seed("[host][xqa] configs");
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  Arch host;
  host.host = true;
  const Problem p = make_problem(64, 8, 2, 16, Layout::Nhd, kc::kBF16, kc::kBF16, kc::kBF16, 2, MaskKind::Causal, true,
                                 false, false, true);
  const auto space = search_space(p, host);
  REQUIRE(space.size() >= 6);
  CHECK(space.front() == default_config(p, host));
  for (const Config& cfg : space) {
    HostCombo cb;
    cb.name = cfg.key();
    cb.p = p;
    cb.config = cfg.key();
    cb.max_seq_len = 300;
    cb.forced_splits = cfg.tokens_per_tile == 32 ? 3 : 0;
    run_combo(rt, cb, seed + std::hash<std::string>{}(cfg.key()));
  }
}

TEST_CASE("host xqa_decode rejects bad arguments naming the field", "[host][xqa]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  const Problem p = make_problem(64, 8, 2, 16, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 1, MaskKind::None, false,
                                 false, false, false);
  test::XqaRandomOptions o;
  o.batch = 2;
  o.max_seq_len = 50;
  const test::XqaRandomCase c = test::make_xqa_case(p, o);
  std::vector<unsigned char> out(size_t(c.num_tokens) * p.num_q_heads * p.head_dim * 2);
  XqaDecodeArgs a = test::host_args(c, out.data(), nullptr);
  auto expect_field = [&](XqaDecodeArgs bad, const char* field) {
    try {
      xqa_decode_host(rt, p, bad, 1);
      FAIL("expected invalid_argument for " << field);
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains(field));
    }
  };
  XqaDecodeArgs b = a;
  b.q = nullptr;
  expect_field(b, "q:");
  b = a;
  b.config = "t64.s3.w4";  // a CUDA config
  expect_field(b, "config");
  b = a;
  b.config = "t48.v8.u4";
  expect_field(b, "config");
  b = a;
  b.num_tokens = 3;
  expect_field(b, "num_tokens");

  // A sliding window wider than any sequence is refused rather than wrapped in the kernel's 32-bit arithmetic.
  Problem windowed = p;
  windowed.sliding_window = true;
  b = a;
  b.window_left = 2147483647;
  CHECK_THROWS_WITH(xqa_decode_host(rt, windowed, b, 1),
                    Catch::Contains("window_left: expected 0..2^30 (problem has a sliding window), got 2147483647"));
  b.window_left = 1 << 30;
  CHECK_NOTHROW(xqa_decode_host(rt, windowed, b, 1));
}

TEST_CASE("host xqa_decode takes strided q/out, the K/V pair and device-held scales", "[host][xqa][forms]") {
  KTUNE_REQUIRE_HOST();
  const uint64_t seed = test::run_seed("[host][xqa][forms]");
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  const DType BF = kc::kBF16, FP = kc::kFP16, E4 = kc::kE4M3;
  // 16-bit Q and output (the device q / o scales must be ignored), FP8 Q, KV and output (they apply), sinks.
  const std::vector<Problem> problems = {
      make_problem(128, 8, 2, 16, Layout::Hnd, BF, BF, BF, 2, MaskKind::Causal, false, false, false, true),
      make_problem(64, 8, 2, 32, Layout::Nhd, E4, E4, E4, 1, MaskKind::None, false, false, false, true),
      make_problem(64, 4, 4, 16, Layout::Nhd, FP, E4, FP, 4, MaskKind::Explicit, true, false, false, true),
  };
  const test::XqaKvForm forms[] = {test::XqaKvForm::combined, test::XqaKvForm::separate, test::XqaKvForm::v_before_k,
                                   test::XqaKvForm::stacked, test::XqaKvForm::views};
  uint64_t i = 0;
  for (const Problem& p : problems)
    for (test::XqaKvForm form : forms) {
      ++i;
      run_forms(rt, p, form, i % 2 == 1, 0, nullptr, seed + 7919 * i);
    }
  // The combine pass stores through the out strides too.
  run_forms(rt, problems[0], test::XqaKvForm::views, false, 3, "t16.v8.u1", seed + 1);
  run_forms(rt, problems[1], test::XqaKvForm::separate, true, 2, "t16.v8.u1", seed + 2);
}

TEST_CASE("host xqa_decode with device-held scales follows a changed scale", "[host][xqa][forms]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  const Problem p = make_problem(64, 4, 2, 16, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 1, MaskKind::None, false,
                                 false, false, false);
  test::XqaRandomOptions o;
  o.batch = 2;
  o.max_seq_len = 100;
  o.seed = test::run_seed("[host][xqa][forms] changed scale");
  const test::XqaRandomCase c = test::make_xqa_case(p, o);
  const size_t bytes = size_t(c.num_tokens) * p.num_q_heads * p.head_dim * 2;
  std::vector<unsigned char> a_out(bytes, 0xFF), b_out(bytes, 0xFF);
  float v_scale = 1.f;
  XqaDecodeArgs a = test::host_args(c, a_out.data(), nullptr);
  a.v_scale_ptr = &v_scale;
  xqa_decode_host(rt, p, a, 2);
  v_scale = 2.f;  // the same arguments, a new value behind the pointer: out doubles exactly
  a.out = b_out.data();
  xqa_decode_host(rt, p, a, 2);
  for (size_t i = 0; i < bytes / 2; ++i) {
    const float x = kc::to_float(kc::kBF16, a_out.data(), static_cast<long long>(i));
    const float y = kc::to_float(kc::kBF16, b_out.data(), static_cast<long long>(i));
    REQUIRE(std::isfinite(x));
    REQUIRE(y == 2 * x);
  }
}

TEST_CASE("host xqa_decode: q_len above the problem's max_q_len (and above 64) is refused", "[host][xqa]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  Problem p = make_problem(64, 8, 2, 16, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 64, MaskKind::Explicit, false,
                           false, false, false);
  p.max_q_len = 65;
  CHECK_THROWS_WITH(p.validate(), Catch::Contains("max_q_len: expected 1..64, got 65"));
  p.max_q_len = 64;
  test::XqaRandomOptions o;
  o.batch = 2;
  o.max_seq_len = 200;
  o.ragged = true;
  const test::XqaRandomCase c = test::make_xqa_case(p, o);
  std::vector<unsigned char> out(size_t(c.num_tokens + 2) * p.num_q_heads * p.head_dim * 2);
  const XqaDecodeArgs a = test::host_args(c, out.data(), nullptr);
  auto expect_field = [&](const XqaDecodeArgs& bad, const char* field) {
    try {
      xqa_decode_host(rt, p, bad, 1);
      FAIL("expected invalid_argument for " << field);
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains(field));
    }
  };
  // ragged: a request of 65 query tokens
  std::vector<int32_t> cu = {0, 65, 65};
  std::vector<int32_t> lens = {100, 0};
  XqaDecodeArgs b = a;
  b.q_cu_seq_lens = cu.data();
  b.seq_lens = lens.data();
  b.num_tokens = 65;
  std::vector<unsigned char> q(size_t(65) * p.num_q_heads * p.head_dim * 2, 0x3C);
  std::vector<unsigned short> mask(size_t(65) * 4, 0xFFFF);
  b.q = q.data();
  b.mask = mask.data();
  b.out = out.data();
  expect_field(b, "q_cu_seq_lens[1] (request 0)");
  // uniform: q_len_per_req 65
  b = a;
  b.q_cu_seq_lens = nullptr;
  b.q_len_per_req = 65;
  b.num_tokens = 65 * a.batch;
  expect_field(b, "q_len_per_req");
}

TEST_CASE("host xqa_decode: a checked problem runs the unchecked one's tuned config and kernel", "[host][xqa]") {
  // The host checks every index itself, so the checked flag changes nothing a host kernel does.
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  Problem p = make_problem(64, 8, 2, 16, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 1, MaskKind::None, false,
                           false, false, false);
  Problem checked = p;
  checked.checked = true;
  CHECK(xqa_decode_host_plan(rt, checked, 3, 200).source == "default");
  rt.remember_host_tuned_config("xqa_decode", tuning_key(p.key(), {{"b", 4}, {"l", 256}}), "t32.v8.u2");
  const XqaHostPlan t = xqa_decode_host_plan(rt, checked, 3, 200);
  CHECK(t.source == "tuned");
  CHECK(t.config == "t32.v8.u2");
  CHECK(&xqa_decode_host_kernel(rt, checked, t.config) == &xqa_decode_host_kernel(rt, p, t.config));
}

TEST_CASE("host xqa_decode plan: max_seq_len past 2^30 is refused, as on the GPU", "[host][xqa]") {
  // Its bucket would not fit an int and the split planner's tile count would overflow.
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  const Problem p = make_problem(64, 8, 2, 16, Layout::Hnd, kc::kBF16, kc::kBF16, kc::kBF16, 1, MaskKind::None,
                                 false, false, false, false);
  for (int len : {(1 << 30) + 1, 2147483647}) {
    try {
      xqa_decode_host_plan(rt, p, 3, len);
      FAIL("max_seq_len " << len << " was planned");
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains("max_seq_len: expected an upper bound of seq_lens in 1..2^30"));
    }
  }
  KTUNE_REQUIRE_HOST();  // the refusals above need no host backend; a plan does
  CHECK(xqa_decode_host_plan(rt, p, 3, 1 << 30).num_splits >= 1);
}
