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
