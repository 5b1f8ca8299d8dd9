#include <catch2/catch.hpp>

#include <set>

#include "autotune/select.hpp"
#include "autotune/sweep.hpp"
#include "fake_timer.hpp"
#include "ktune/error.hpp"

using namespace ktune::autotune;
using ktune_test::FakeTimer;

namespace {

CandidateResult ran(const std::string& config, double median_ms) {
  CandidateResult c;
  c.config = config;
  c.ok = true;
  c.m.median_ms = median_ms;
  c.m.samples_ms = {median_ms};
  c.m.rounds = 1;
  c.m.stable = true;
  return c;
}

CandidateResult failed(const std::string& config, const std::string& error) {
  CandidateResult c;
  c.config = config;
  c.error = error;
  return c;
}

MeasureOptions quick() {
  MeasureOptions o;
  o.warmup_iters = 1;
  o.samples = 10;
  o.iters_per_sample = 1;
  o.max_spread = 1.0;  // never re-measure: these tests are about selection
  o.max_rounds = 1;
  return o;
}

}  // namespace

TEST_CASE("autotune select: the earliest candidate within noise of the best wins", "[autotune]") {
  std::vector<CandidateResult> c = {ran("t32.s2.w4", 1.02), ran("t64.s2.w4", 1.00), ran("t64.s3.w8", 0.995)};
  CHECK(select_winner(c, 0.03) == 0);  // 1.02 <= 0.995 * 1.03
  CHECK(select_winner(c, 0.0) == 2);   // no tolerance: plain argmin
  c[0].m.median_ms = 1.10;
  CHECK(select_winner(c, 0.03) == 1);
  CHECK(select_winner(c, 0.004) == 2);  // 1.00 > 0.995 * 1.004
}

TEST_CASE("autotune select: failed candidates are skipped, whatever their timing fields say", "[autotune]") {
  std::vector<CandidateResult> c = {failed("t32.s2.w4", "ptxas: too many resources"), ran("t64.s2.w4", 2.0),
                                    ran("t64.s3.w8", 1.0)};
  c[0].m.median_ms = 0.001;  // left over from a partial measurement: must not count
  CHECK(select_winner(c, 0.03) == 2);
  c[2].ok = false;
  CHECK(select_winner(c, 0.03) == 1);
}

TEST_CASE("autotune select: no usable candidate is an error quoting the first errors", "[autotune]") {
  std::vector<CandidateResult> c = {failed("a", "nvrtc: error A"), failed("b", "launch: error B"),
                                    failed("c", "error C"), failed("d", "error D"), failed("e", "error E")};
  try {
    select_winner(c, 0.03);
    FAIL("no error");
  } catch (const ktune::Error& e) {
    CHECK(e.subsystem() == "autotune");
    std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("no candidate compiled and ran"));
    CHECK_THAT(what, Catch::Contains("[a] nvrtc: error A"));
    CHECK_THAT(what, Catch::Contains("[b] launch: error B"));
    CHECK_THAT(what, Catch::Contains("[c] error C"));
    CHECK_THAT(what, !Catch::Contains("error D"));
    CHECK_THAT(what, Catch::Contains("and 2 more"));
  }
  CHECK_THROWS_WITH(select_winner({}, 0.03), Catch::Contains("candidates"));
  CHECK_THROWS_WITH(select_winner({ran("a", 1)}, -0.1), Catch::Contains("noise_fraction"));
}

TEST_CASE("autotune sweep: a candidate failing to prepare or launch is recorded and tuning goes on", "[autotune]") {
  FakeTimer timer(11);
  timer.script("t32.s2.w4", {1.5});
  timer.script("t64.s2.w4", {1.0});
  FakeTimer::Script broken{0.5};
  broken.launch_fails = true;
  timer.script("t64.s4.w8", broken);
  timer.script("t128.s4.w8", {0.9});
  std::vector<std::string> configs = {"t32.s2.w4", "t64.s2.w4", "t64.s4.w8", "t128.s2.w8", "t128.s4.w8"};
  auto results = sweep(timer, configs, [&](const std::string& config) {
    if (config == "t128.s2.w8") throw ktune::Error(ktune::Status::compile_error, "compiler", "smem over the limit");
    return timer.launcher(config);
  }, quick());
  REQUIRE(results.size() == configs.size());
  for (size_t i = 0; i < configs.size(); ++i) CHECK(results[i].config == configs[i]);
  CHECK(results[0].ok);
  CHECK(results[1].ok);
  CHECK_FALSE(results[2].ok);
  CHECK_THAT(results[2].error, Catch::Contains("too many resources"));
  CHECK_FALSE(results[3].ok);
  CHECK_THAT(results[3].error, Catch::Contains("smem over the limit"));
  CHECK(results[4].ok);
  CHECK(select_winner(results, 0.03) == 4);
  CHECK_THROWS_AS(sweep(timer, configs, [&](const std::string& c) { return timer.launcher(c); }, MeasureOptions{0, 0}),
                  ktune::Error);
}

TEST_CASE("autotune select: equally fast configs give the same winner in every run", "[autotune]") {
  std::set<size_t> tolerant, argmin;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    FakeTimer timer(seed);
    timer.script("t64.s2.w4", {1.000, 0.01});  // default config, listed first
    timer.script("t64.s3.w4", {1.000, 0.01});  // as fast, within noise
    timer.script("t32.s2.w4", {1.080, 0.01});  // clearly slower
    auto results = sweep(timer, {"t64.s2.w4", "t64.s3.w4", "t32.s2.w4"},
                         [&](const std::string& c) { return timer.launcher(c); }, quick());
    tolerant.insert(select_winner(results, 0.03));
    argmin.insert(select_winner(results, 0.0));
  }
  CHECK(tolerant == std::set<size_t>{0});
  // The noise is real: a plain argmin flips between the two equal configs across runs.
  CHECK(argmin == std::set<size_t>{0, 1});
}
