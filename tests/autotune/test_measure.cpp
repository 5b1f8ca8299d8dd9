#include <catch2/catch.hpp>

#include <cmath>

#include "autotune/measure.hpp"
#include "fake_timer.hpp"
#include "ktune/error.hpp"

using namespace ktune::autotune;
using ktune_test::FakeTimer;

namespace {

MeasureOptions options(int max_rounds = 4) {
  MeasureOptions o;
  o.warmup_iters = 3;
  o.samples = 10;
  o.iters_per_sample = 5;
  o.max_spread = 0.02;
  o.max_rounds = max_rounds;
  return o;
}

}  // namespace

TEST_CASE("autotune measure: a quiet candidate is measured in one round", "[autotune]") {
  FakeTimer timer(1);
  timer.script("a", {0.5, 0.002});
  Measurement m = measure(timer, timer.launcher("a"), options());
  CHECK(m.rounds == 1);
  CHECK(m.stable);
  CHECK(m.samples_ms.size() == 10);
  CHECK(m.median_ms == Approx(0.5).epsilon(0.003));
  CHECK(m.spread <= 0.02);
  // One discarded warm-up call, then the samples; launches are counted per iteration.
  CHECK(timer.calls("a") == 1 + 10);
  CHECK(timer.launches("a") == 3 + 10 * 5);
}

TEST_CASE("autotune measure: a disturbed first round is re-measured and pooled", "[autotune]") {
  FakeTimer::Script disturbed{1.0, 0.002};
  disturbed.noisy_calls = 1 + 10;  // the warm-up call and the whole first round
  disturbed.disturbance = 0.8;

  FakeTimer once(7);
  once.script("a", disturbed);
  Measurement first_only = measure(once, once.launcher("a"), options(1));
  REQUIRE(first_only.spread > 0.02);  // the script really is noisy enough to matter
  CHECK_FALSE(first_only.stable);
  CHECK(first_only.rounds == 1);

  FakeTimer timer(7);
  timer.script("a", disturbed);
  // Quiet rounds outvote the disturbed one once they hold the median's confidence interval (4 rounds of 10).
  Measurement m = measure(timer, timer.launcher("a"), options(6));
  CHECK(m.rounds >= 2);
  CHECK(m.stable);
  CHECK(m.spread <= 0.02);
  CHECK(m.samples_ms.size() == static_cast<size_t>(10 * m.rounds));  // pooled, not replaced
  CHECK(m.median_ms == Approx(1.0).epsilon(0.01));
  CHECK(std::fabs(m.median_ms - 1.0) < std::fabs(first_only.median_ms - 1.0));
}

TEST_CASE("autotune measure: a candidate that never settles stops at max_rounds, flagged unstable", "[autotune]") {
  FakeTimer timer(3);
  FakeTimer::Script s{1.0, 0.002};
  s.noisy_calls = 1000;
  timer.script("a", s);
  Measurement m = measure(timer, timer.launcher("a"), options(3));
  CHECK(m.rounds == 3);
  CHECK_FALSE(m.stable);
  CHECK(m.samples_ms.size() == 30);
  CHECK(m.spread > 0.02);
}

TEST_CASE("autotune measure: spread is the median's confidence interval relative to the median", "[autotune]") {
  // 10 samples: the interval is the 2nd..9th smallest.
  CHECK(median_spread({10, 9, 8, 7, 6, 5, 4, 3, 2, 1}) == Approx((9.0 - 2.0) / 5.5));
  // Fewer than 9 samples: the whole range.
  CHECK(median_spread({1, 2, 3, 4, 5}) == Approx(4.0 / 3.0));
  CHECK(median_of({3, 1, 2}) == 2);
  CHECK(median_of({4, 1, 3, 2}) == 2.5);
  CHECK(median_spread({2, 2, 2}) == 0);
  // More samples of the same distribution: a narrower interval.
  std::vector<double> ten, hundred;
  for (int i = 0; i < 10; ++i) ten.push_back(1 + 0.01 * i);
  for (int i = 0; i < 100; ++i) hundred.push_back(1 + 0.001 * i);
  CHECK(median_spread(hundred) < median_spread(ten));
  CHECK_THROWS_AS(median_of({}), ktune::Error);
}

TEST_CASE("autotune measure: bad options and bad timer answers are errors", "[autotune]") {
  FakeTimer timer(1);
  timer.script("a", {});
  auto with = [](auto edit) {
    MeasureOptions o;
    edit(o);
    return o;
  };
  CHECK_THROWS_WITH(measure(timer, timer.launcher("a"), with([](MeasureOptions& o) { o.samples = 0; })),
                    Catch::Contains("samples: expected >= 1, got 0"));
  CHECK_THROWS_WITH(measure(timer, timer.launcher("a"), with([](MeasureOptions& o) { o.max_rounds = 0; })),
                    Catch::Contains("max_rounds"));
  CHECK_THROWS_WITH(measure(timer, timer.launcher("a"), with([](MeasureOptions& o) { o.warmup_iters = -1; })),
                    Catch::Contains("warmup_iters"));
  CHECK_THROWS_WITH(measure(timer, timer.launcher("a"), with([](MeasureOptions& o) { o.max_spread = NAN; })),
                    Catch::Contains("max_spread"));

  struct NanTimer : Timer {
    double time_ms(const std::function<void()>&, int) override { return NAN; }
  } nan_timer;
  try {
    measure(nan_timer, [] {}, MeasureOptions{});
    FAIL("no error");
  } catch (const ktune::Error& e) {
    CHECK(e.status() == ktune::Status::internal);
  }
}
