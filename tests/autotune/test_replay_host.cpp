// autotune::replay calls each op through the engine's entry point (no forced config) and reports the config the
// runtime chose: on a cache with binaries but no tuning rows, under KTUNE_JIT=0, it runs the defaults with 0
// compiles; a tuned config is reported as tuned; a tuned config the family cannot run is not forced (the engine
// falls back to its default, and so does the report). Host backend: the same replay driver as the GPU's.
#include <catch2/catch.hpp>

#include <string>

#include "autotune/presets.hpp"
#include "autotune/warmup.hpp"
#include "host/host_support.hpp"
#include "ktune/family.hpp"
#include "ktune/tuning.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;

namespace {

const char* const kPreset = R"({"name": "one-op", "description": "one xqa op, one bucket",
  "buckets": {"batch": {"min": 1, "max": 1}, "seq_len": {"min": 256, "max": 256}},
  "ops": [{"label": "attn", "family": "xqa_decode",
           "problem": {"head_dim": 64, "num_q_heads": 4, "num_kv_heads": 1, "page_size": 16}}]})";
const char* const kProblem = "d64.h4.kv1.p16.hnd.bf16-bf16-bf16.q1.none";

}  // namespace

TEST_CASE("replay takes the engine's path and reports the config the runtime chose", "[host][replay][autotune]") {
  KTUNE_REQUIRE_HOST();
  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("replay.db");
  const FamilyInfo& fam = family("xqa_decode");
  const Arch host = Arch::host_cpu();
  const std::string def = fam.default_config(kProblem, host);
  std::string other;
  for (const auto& c : fam.search_space(kProblem, host, DeviceLimits{}))
    if (c != def && other.empty()) other = c;
  REQUIRE(!other.empty());
  {
    Runtime build(o);  // the image build: binaries, no tuning rows
    build.ensure_binary(fam.generate(kProblem, def, host), host);
    build.ensure_binary(fam.generate(kProblem, other, host), host);
  }
  const autotune::Preset preset = autotune::parse_preset(kPreset, "test preset");
  const std::string key = tuning_key(kProblem, {{"b", 1}, {"l", 256}});
  RuntimeOptions serve = o;
  serve.allow_jit = false;  // KTUNE_JIT=0

  SECTION("no tuning rows: the defaults, named, with 0 compiles") {
    Runtime rt(serve);
    const autotune::ReplayReport r = autotune::replay(rt, preset, 8192, true, "host");
    REQUIRE(r.ops.size() == 1);
    CHECK(r.ops[0].tuning_key == key);
    CHECK(r.ops[0].config == def);
    CHECK(r.ops[0].source == "default");
    CHECK_FALSE(r.ops[0].tuned);
    CHECK(r.ops[0].labels == std::vector<std::string>{"attn"});
    CHECK(r.stats.compiles == 0);
    CHECK(r.tunings == 0);
  }
  SECTION("a tuned config: reported as tuned, no compile") {
    Runtime rt(serve);
    rt.remember_host_tuned_config("xqa_decode", key, other);
    const autotune::ReplayReport r = autotune::replay(rt, preset, 8192, false, "host");
    REQUIRE(r.ops.size() == 1);
    CHECK(r.ops[0].config == other);
    CHECK(r.ops[0].source == "tuned");
    CHECK(r.stats.compiles == 0);
  }
  SECTION("a tuned config the family cannot run is not forced: the engine's default runs") {
    Runtime rt(serve);
    rt.remember_host_tuned_config("xqa_decode", key, "t4096.v3.u9");
    const autotune::ReplayReport r = autotune::replay(rt, preset, 8192, true, "host");
    REQUIRE(r.ops.size() == 1);
    CHECK(r.ops[0].config == def);
    CHECK(r.ops[0].source == "default");
    CHECK(r.stats.compiles == 0);
  }
}
