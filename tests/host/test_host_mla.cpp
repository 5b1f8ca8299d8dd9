// sparse_mla_decode on the host CPU (the LLVM backend JIT-compiling templates/sparse_mla_decode/host_kernel.h)
// against the fp64 reference of tests/sparse_mla/mla_reference.hpp, through the engine call
// ktune::sparse_mla_decode_host.
//
// The kernels are a fixed sample of the GPU test's matrix at small sizes (heads 16/64/128, topk 64..512 (some
// not a multiple of the tile), page 64/256, fp8_ds_mla and bf16 caches, sinks on/off, one or two (MTP) query
// positions, planned and forced splits with and without a caller workspace); together the combos run every
// host config of the search space (checked below). The data are fresh every run (seed printed;
// KTUNE_TEST_SEED=<seed> replays): pages in random physical places, random -1s, one token with only -1s,
// NaN-filled pages that no index refers to, outputs and LSE poisoned with NaN before the call.
//
// Tolerances (the host kernel keeps fp32 rows, scores, probabilities and accumulators; what is left is the
// bf16 output rounding): relative L2 < 5e-3, every row < 2e-2, |LSE - ref| < 2e-3; a token with no valid
// index must be exactly 0 with LSE -inf (or the sink logit).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "autotune/presets.hpp"
#include "autotune/tuner.hpp"
#include "autotune/warmup.hpp"
#include "host/host_support.hpp"
#include "ktune/error.hpp"
#include "ktune/sparse_mla_decode_host.hpp"
#include "sparse_mla/mla_reference.hpp"
#include "support/cache_file.hpp"
#include "support/seed.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
using namespace ktune::mla;

namespace {

struct MlaCombo {
  std::string name;
  Problem p;
  std::string config;  // empty: the launch's (default) config
  int num_tokens = 4, threads = 0, forced_splits = 0;
  int all_skip_token = 1;  // this token gets only -1 (< 0: none)
  bool sinks = false, own_workspace = false;
  bool strided_q = false;  // q rows in a wider NaN-filled buffer (padded heads and rows)
  double skip_fraction = 0.1;
};

Problem make_problem(int heads, int topk, int page, KvFormat fmt, int q_len) {
  Problem p;
  p.num_heads = heads;
  p.kv_lora_rank = 512;
  p.rope_dim = 64;
  p.topk = topk;
  p.page_size = page;
  p.kv_format = fmt;
  p.max_q_len = q_len;
  p.validate();
  return p;
}

// Fixed list (never changes between runs), small enough for CI: every listed value appears at least once and
// the configs cover the host search space.
std::vector<MlaCombo> combos() {
  const KvFormat F8 = KvFormat::Fp8DsMla, BF = KvFormat::Bf16;
  std::vector<MlaCombo> v;
  auto add = [&](const char* name, Problem p, std::string cfg, std::function<void(MlaCombo&)> knobs) {
    MlaCombo c;
    c.name = name;
    c.p = p;
    c.config = std::move(cfg);
    knobs(c);
    v.push_back(c);
  };
  auto none = [](MlaCombo&) {};
  add("h16_k64_p64_fp8_q1_default", make_problem(16, 64, 64, F8, 1), "", none);
  add("h16_k256_p256_bf16_sink_mtp", make_problem(16, 256, 256, BF, 2), "t64.g16.v16.u2",
      [](MlaCombo& c) { c.sinks = true; });
  add("h64_k128_p64_bf16_q1", make_problem(64, 128, 64, BF, 1), "t32.g8.v16.u2",
      [](MlaCombo& c) { c.num_tokens = 3; c.skip_fraction = 0.5; });
  add("h64_k512_p256_fp8_sink_mtp", make_problem(64, 512, 256, F8, 2), "t64.g8.v8.u4",
      [](MlaCombo& c) { c.sinks = true; });
  add("h128_k64_p256_fp8_sink_q1", make_problem(128, 64, 256, F8, 1), "t32.g16.v8.u4",
      [](MlaCombo& c) { c.sinks = true; c.num_tokens = 2; });
  add("h128_k192_p64_bf16_mtp_tail", make_problem(128, 192, 64, BF, 2), "t64.g16.v8.u4",
      [](MlaCombo& c) { c.num_tokens = 2; });
  add("h16_k512_p64_fp8_planned_split", make_problem(16, 512, 64, F8, 1), "t32.g8.v8.u4",
      [](MlaCombo& c) { c.num_tokens = 1; c.threads = 8; c.all_skip_token = -1; });
  add("h64_k320_p64_fp8_sink_forced_split_ws", make_problem(64, 320, 64, F8, 1), "t64.g8.v16.u2",
      [](MlaCombo& c) { c.sinks = true; c.forced_splits = 5; c.own_workspace = true; });
  add("h64_k96_p64_fp8_more_splits_than_tiles", make_problem(64, 96, 64, F8, 1), "t64.g16.v16.u2",
      [](MlaCombo& c) { c.forced_splits = 5; c.num_tokens = 2; });  // 2 tiles: 3 empty splits
  add("h16_k64_p256_bf16_all_skip_split", make_problem(16, 64, 256, BF, 2), "",
      [](MlaCombo& c) { c.num_tokens = 2; c.skip_fraction = 1.0; c.forced_splits = 2; c.sinks = true; });
  return v;
}

void run_combo(Runtime& rt, const MlaCombo& cb, uint64_t seed, std::set<std::string>* configs_run) {
  test::MlaCaseOptions o;
  o.num_tokens = cb.num_tokens;
  o.skip_fraction = cb.skip_fraction;
  o.all_skip_token = cb.all_skip_token < cb.num_tokens ? cb.all_skip_token : -1;
  o.sinks = cb.sinks;
  o.seed = seed;
  const test::MlaCase c = test::make_mla_case(cb.p, o);
  const Problem& p = cb.p;
  const size_t rows = size_t(c.opt.num_tokens) * p.num_heads;
  std::vector<uint16_t> out(rows * p.kv_lora_rank);
  std::vector<float> lse(rows);
  std::memset(out.data(), 0xFF, out.size() * sizeof(uint16_t));  // NaN: every element must be written
  std::memset(lse.data(), 0xFF, lse.size() * sizeof(float));

  SparseMlaDecodeArgs a;
  a.q = c.q.data();
  std::vector<uint16_t> q_wide;
  if (cb.strided_q) {  // [T, heads + 1, row + 8]: the rows of c.q, the rest NaN
    const int64_t row = p.kv_lora_rank + p.rope_dim, sh = row + 8, st = (p.num_heads + 1) * sh;
    q_wide.assign(size_t(c.opt.num_tokens * st), 0x7FC0);
    for (int64_t t = 0; t < c.opt.num_tokens; ++t)
      for (int64_t h = 0; h < p.num_heads; ++h)
        std::memcpy(q_wide.data() + t * st + h * sh, c.q.data() + (t * p.num_heads + h) * row, row * 2);
    a.q = q_wide.data();
    a.q_stride_token = st;
    a.q_stride_head = sh;
  }
  a.kv_cache = c.kv.data();
  a.indices = c.indices.data();
  a.sinks = cb.sinks ? c.sinks.data() : nullptr;
  a.out = out.data();
  a.lse = lse.data();
  a.num_tokens = c.opt.num_tokens;
  a.num_pages = c.num_pages;
  a.softmax_scale = c.softmax_scale;
  if (!cb.config.empty()) a.config = cb.config.c_str();
  a.num_splits = cb.forced_splits;
  const SparseMlaHostPlan plan = sparse_mla_decode_host_plan(rt, p, a.num_tokens, cb.threads, a.config, a.num_splits);
  std::vector<float> ws;
  if (cb.own_workspace && plan.workspace_bytes > 0) {
    ws.assign(plan.workspace_bytes / sizeof(float), 0.f);
    a.workspace = ws.data();
    a.workspace_bytes = plan.workspace_bytes;
  }
  INFO(cb.name << ": " << p.key() << " / " << plan.config << " (" << plan.source << "), splits " << plan.num_splits
               << ", threads " << plan.threads << ", tokens " << a.num_tokens << ", seed " << seed);
  sparse_mla_decode_host(rt, p, a, cb.threads);
  if (configs_run) configs_run->insert(plan.config);

  const test::MlaRef ref = test::mla_reference(c);
  const test::MlaCompare cmp = test::mla_compare(c, ref, out.data(), lse.data());
  INFO("rel_l2 " << cmp.rel_l2 << ", max_row_rel " << cmp.max_row_rel << ", lse " << cmp.lse_max_abs);
  CHECK(cmp.nonfinite == 0);
  CHECK(cmp.lse_bad == 0);
  CHECK(cmp.rel_l2 < 5e-3);
  CHECK(cmp.max_row_rel < 2e-2);
  CHECK(cmp.lse_max_abs < 2e-3);
  if (cb.forced_splits > 0) CHECK(plan.num_splits == cb.forced_splits);
}

}  // namespace

TEST_CASE("host sparse_mla_decode matches the fp64 reference over the matrix", "[host][mla]") {
  KTUNE_REQUIRE_HOST();
  const uint64_t seed = test::run_seed("[host][mla]");
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  std::set<std::string> configs_run;
  const auto list = combos();
  for (size_t i = 0; i < list.size(); ++i) run_combo(rt, list[i], seed + 1000003ull * i, &configs_run);
  // Every host config of the search space ran on at least one shape (the space is the same for every problem
  // whose head count is a multiple of 16, i.e. all of them).
  Arch host;
  host.host = true;
  const auto space = search_space(make_problem(16, 64, 64, KvFormat::Fp8DsMla, 1), host);
  CHECK(space.front() == default_config(make_problem(16, 64, 64, KvFormat::Fp8DsMla, 1), host));
  for (const Config& cfg : space) {
    INFO("host config " << cfg.key() << " was not exercised by any combo");
    CHECK(configs_run.count(cfg.key()) == 1);
  }
}

TEST_CASE("host sparse_mla_decode reads q through token and head strides", "[host][mla][forms]") {
  KTUNE_REQUIRE_HOST();
  const uint64_t seed = test::run_seed("[host][mla][forms]");
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  std::vector<MlaCombo> list = combos();
  for (size_t i = 0; i < list.size(); i += 3) {
    list[i].strided_q = true;
    run_combo(rt, list[i], seed + 1000003ull * i, nullptr);
  }
}

TEST_CASE("host sparse_mla_decode rejects bad arguments and out-of-range indices naming them", "[host][mla]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  Runtime rt(test::on_env_cache_or(dir.file("host.db")));
  const Problem p = make_problem(16, 64, 64, KvFormat::Fp8DsMla, 1);
  test::MlaCaseOptions o;
  o.num_tokens = 3;
  const test::MlaCase c = test::make_mla_case(p, o);
  std::vector<uint16_t> out(size_t(3) * p.num_heads * p.kv_lora_rank, 0xFFFF);
  std::vector<int32_t> idx = c.indices;
  SparseMlaDecodeArgs a;
  a.q = c.q.data();
  a.kv_cache = c.kv.data();
  a.indices = idx.data();
  a.out = out.data();
  a.num_tokens = 3;
  a.num_pages = c.num_pages;
  a.softmax_scale = c.softmax_scale;
  auto expect_field = [&](SparseMlaDecodeArgs bad, const std::string& field) {
    try {
      sparse_mla_decode_host(rt, p, bad, 1);
      FAIL("expected invalid_argument for " << field);
    } catch (const Error& e) {
      CHECK(e.status() == Status::invalid_argument);
      CHECK_THAT(e.what(), Catch::Contains(field));
    }
  };
  SparseMlaDecodeArgs b = a;
  b.q = nullptr;
  expect_field(b, "q:");
  b = a;
  b.q_stride_head = 580;  // not a multiple of 8 elements
  expect_field(b, "q_stride_head:");
  b = a;
  b.q_stride_token = -8;
  expect_field(b, "q_stride_token:");
  b = a;
  b.indices = nullptr;
  expect_field(b, "indices:");
  b = a;
  b.softmax_scale = 0.f;
  expect_field(b, "softmax_scale");
  b = a;
  b.num_pages = 0;
  expect_field(b, "num_pages");
  b = a;
  b.num_tokens = 70000;
  expect_field(b, "num_tokens");
  b = a;
  b.config = "t64.s2.g64";  // a CUDA config
  expect_field(b, "config");
  b = a;
  b.config = "t48.g16.v16.u2";
  expect_field(b, "config");
  b = a;
  b.config = "t32.g32.v16.u2";  // 32 heads per item, 16 heads
  expect_field(b, "config");
  b = a;
  b.num_splits = 65;
  expect_field(b, "num_splits");
  b = a;
  std::vector<float> small_ws(4);
  b.config = "t32.g16.v16.u2";
  b.num_splits = 2;
  b.workspace = small_ws.data();
  b.workspace_bytes = sizeof(float) * small_ws.size();
  expect_field(b, "workspace_bytes");
  // Out-of-range slots (past the cache, or negative other than -1) are refused before anything is written.
  const int64_t slots = c.num_pages * p.page_size;
  for (int64_t badv : {slots, int64_t{-2}}) {
    idx = c.indices;
    idx[size_t(2) * p.topk + 5] = static_cast<int32_t>(badv);
    expect_field(a, "indices (token 2, entry 5)");
    CHECK(std::all_of(out.begin(), out.end(), [](uint16_t v) { return v == 0xFFFF; }));
  }
  idx = c.indices;
  idx[0] = static_cast<int32_t>(slots - 1);  // the last slot is valid
  CHECK_NOTHROW(sparse_mla_decode_host(rt, p, a, 1));
}

TEST_CASE("host warmup tunes deepseek-v3.2's sparse MLA keys, replay then does 0 compiles and 0 tunings",
          "[host][mla][autotune][warmup]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("w.db");
  // batch 1 only (one key: 1 x topk 2048 KV tokens, within the host cap), so the check stays CI-sized
  const autotune::Preset preset =
      autotune::with_overrides(autotune::load_preset("deepseek-v3.2"), std::nullopt, 1, std::nullopt, std::nullopt);
  autotune::WarmupOptions w;
  w.arches = {"host"};
  {
    Runtime rt(o);
    const auto r = autotune::warmup(rt, preset, w);
    CHECK(r.failed == 0);
    CHECK(r.compile_failed == 0);
    CHECK(r.keys == 1);
    CHECK(r.tuned == 1);
    CHECK(r.compiled == 8);  // every host config of the search space
    for (const auto& it : r.items) {
      INFO(it.tuning_key << ": " << it.status);
      CHECK(it.family == "sparse_mla_decode");
      CHECK(it.status == "tuned");
      CHECK_FALSE(it.winner.empty());
    }
  }
  const int64_t tunings_before = autotune::tunings_performed();
  {
    Runtime again(o);
    const auto r = autotune::replay(again, preset, w.host_max_total_tokens, true, "host");
    REQUIRE(r.ops.size() == 1);
    CHECK(r.stats.compiles == 0);
    CHECK(r.tunings == 0);
    CHECK(r.stats.tuning_misses == 0);
    CHECK(r.ops[0].tuned);
    CHECK(r.ops[0].steady_call_ms > 0);
    // the engine call picks the tuned config up too
    Problem p = Problem::from_key("h128.r512.d64.k2048.p64.bf16-fp8ds.q1");
    CHECK(sparse_mla_decode_host_plan(again, p, 1).source == "tuned");
  }
  CHECK(autotune::tunings_performed() == tunings_before);
}
