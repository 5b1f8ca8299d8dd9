#include "autotune/measure.hpp"

#include <algorithm>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::autotune {

void validate_measure_options(const MeasureOptions& o) {
  auto bad = [](const char* field, const std::string& expected, const std::string& got) {
    return Error(Status::invalid_argument, "autotune",
                 fmt::format("measure options: {}: expected {}, got {}", field, expected, got));
  };
  if (o.warmup_iters < 0) throw bad("warmup_iters", ">= 0", std::to_string(o.warmup_iters));
  if (o.samples < 1) throw bad("samples", ">= 1", std::to_string(o.samples));
  if (o.iters_per_sample < 1) throw bad("iters_per_sample", ">= 1", std::to_string(o.iters_per_sample));
  if (o.max_rounds < 1) throw bad("max_rounds", ">= 1", std::to_string(o.max_rounds));
  if (!(o.max_spread >= 0) || !std::isfinite(o.max_spread))
    throw bad("max_spread", "a finite fraction >= 0", fmt::format("{}", o.max_spread));
}

namespace {

double checked(double ms) {
  if (!std::isfinite(ms) || ms < 0)
    throw Error(Status::internal, "autotune", fmt::format("timer: expected a time >= 0 ms, got {}", ms));
  return ms;
}

// The distribution-free 95% confidence interval of the median of n sorted samples is [x(k), x(n-1-k)]
// (0-based), k + 1 being the largest count c with P(Binomial(n, 1/2) <= c - 1) <= 0.025; below 9 samples no
// such c > 1 exists and the interval is the whole range. Summed in log space; lgamma is avoided because glibc's
// writes a global and several GPUs may be measured at once.
size_t ci_lower_rank(size_t n) {
  double log_p = -static_cast<double>(n) * std::log(2.0);  // log P(B = 0)
  double cdf = 0;
  size_t c = 0;
  for (size_t i = 0; i < n; ++i) {
    cdf += std::exp(log_p);  // P(B <= i)
    if (cdf > 0.025) break;
    c = i + 1;
    log_p += std::log(static_cast<double>(n - i) / static_cast<double>(i + 1));
  }
  return c > 0 ? c - 1 : 0;
}

}  // namespace

double median_of(std::vector<double> s) {
  if (s.empty()) throw Error(Status::invalid_argument, "autotune", "median: expected at least one sample, got none");
  std::sort(s.begin(), s.end());
  size_t n = s.size();
  return n % 2 ? s[n / 2] : 0.5 * (s[n / 2 - 1] + s[n / 2]);
}

double median_spread(std::vector<double> s) {
  double med = median_of(s);
  std::sort(s.begin(), s.end());
  size_t j = ci_lower_rank(s.size());
  double width = s[s.size() - 1 - j] - s[j];
  if (med > 0) return width / med;
  return width > 0 ? INFINITY : 0.0;
}

Measurement measure(Timer& timer, const std::function<void()>& launch_once, const MeasureOptions& opts) {
  validate_measure_options(opts);
  if (opts.warmup_iters > 0) checked(timer.time_ms(launch_once, opts.warmup_iters));
  Measurement m;
  m.samples_ms.reserve(static_cast<size_t>(opts.samples));
  while (m.rounds < opts.max_rounds) {
    for (int i = 0; i < opts.samples; ++i) m.samples_ms.push_back(checked(timer.time_ms(launch_once, opts.iters_per_sample)));
    ++m.rounds;
    m.median_ms = median_of(m.samples_ms);
    m.spread = median_spread(m.samples_ms);
    m.stable = m.spread <= opts.max_spread;
    if (m.stable) break;
  }
  return m;
}

}  // namespace ktune::autotune
