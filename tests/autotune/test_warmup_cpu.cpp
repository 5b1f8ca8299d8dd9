// Warmup without a GPU: compile every specialization a preset needs for explicit arches; a second run finds
// everything in the cache.
#include <catch2/catch.hpp>

#include "autotune/presets.hpp"
#include "autotune/warmup.hpp"
#include "ktune/cache_admin.hpp"
#include "nvrtc_api.hpp"
#include "support/skip.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;

TEST_CASE("warmup without a GPU compiles every config of a preset, then hits the cache", "[autotune][warmup]") {
  KTUNE_REQUIRE_NVRTC();
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("w.db");
  autotune::Preset preset = autotune::load_preset("llama-3.1-8b");
  autotune::WarmupOptions w;
  w.arches = {"sm_90a"};
  w.tune = false;
  w.all_candidates = false;  // defaults only keeps CI fast; candidates are covered by the GPU warmup
  int first_compiled = 0;
  {
    Runtime rt(o);
    auto r = autotune::warmup(rt, preset, w);
    CHECK(r.failed == 0);
    CHECK(r.compile_failed == 0);
    CHECK(r.compiled > 0);
    CHECK(r.keys > 0);
    CHECK(r.tuned == 0);
    first_compiled = r.compiled;
  }
  Runtime again(o);
  auto r2 = autotune::warmup(again, preset, w);
  CHECK(r2.compiled == 0);
  CHECK(r2.cache_hits == first_compiled);
  CHECK(again.stats().compiles == 0);
  CHECK(cache_list(o.cache_path).size() == static_cast<size_t>(first_compiled));
}

TEST_CASE("warmup: an arch a family has no kernel for fails that op once, the other arches go on", "[autotune][warmup]") {
  KTUNE_REQUIRE_NVRTC();
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("w.db");
  autotune::Preset preset = autotune::parse_preset(R"({"name": "one-op",
    "buckets": {"batch": {"min": 1, "max": 2}, "seq_len": {"min": 512, "max": 512}},
    "ops": [{"label": "attn", "family": "xqa_decode",
             "problem": {"head_dim": 128, "num_q_heads": 32, "num_kv_heads": 8, "page_size": 32}}]})", "test");
  autotune::WarmupOptions w;
  w.arches = {"sm_75", "sm_90a"};  // a real GPU, older than any ktune kernel
  w.tune = false;
  w.all_candidates = false;
  Runtime rt(o);
  const auto r = autotune::warmup(rt, preset, w);
  CHECK(r.failed == 1);  // one op on one arch, not one per bucket
  CHECK(r.keys == 2);    // sm_90a's two buckets
  CHECK(r.compile_failed == 0);
  CHECK(r.compiled == 2);  // sm_90a: the default config and the shared module
  bool named = false;
  for (const auto& item : r.items)
    named = named || item.status.find("failed: op attn on sm_75: ") != std::string::npos;
  CHECK(named);
}
