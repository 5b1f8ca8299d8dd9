// Timing one candidate: warm up, take samples, re-measure while the estimate is too uncertain.
//
// The Timer interface hides the device: the GPU implementation times with events and flushes L2 (or rotates
// input buffers) between launches; tests use a scripted fake. Everything here is pure arithmetic on its
// answers.
#pragma once

#include <functional>
#include <vector>

#include "ktune/export.hpp"

namespace ktune::autotune {

class KTUNE_API Timer {
 public:
  virtual ~Timer() = default;
  // Runs launch_once `iters` times (iters >= 1) and returns the mean time of one launch in milliseconds.
  // Exceptions from launch_once propagate (a launch failure is the candidate's failure, not the timer's).
  virtual double time_ms(const std::function<void()>& launch_once, int iters) = 0;
};

struct MeasureOptions {
  int warmup_iters = 3;      // launches before the first sample, timed once and discarded (0: none)
  int samples = 10;          // samples per round
  int iters_per_sample = 5;  // launches averaged into one sample
  double max_spread = 0.03;  // stop once Measurement::spread <= this
  int max_rounds = 4;        // give up re-measuring after this many rounds (the result says !stable)
};

struct Measurement {
  std::vector<double> samples_ms;  // every sample of every round, in the order taken (ms per launch)
  double median_ms = 0;            // median of samples_ms
  // Uncertainty of median_ms, relative to it: (hi - lo) / median, where lo and hi are the order statistics that
  // bound a distribution-free 95% confidence interval of the median. With 10 samples they are the 2nd and 9th
  // smallest, close to (p90 - p10) / median; as rounds pool more samples the interval narrows, so a disturbed
  // first round is outvoted by quiet later ones instead of being re-measured forever.
  double spread = 0;
  int rounds = 0;       // rounds taken (1..max_rounds)
  bool stable = false;  // spread <= max_spread when measuring stopped
};

// Throws Error(invalid_argument) for options out of range: samples, iters_per_sample, max_rounds < 1;
// warmup_iters < 0; max_spread negative or not finite.
KTUNE_API void validate_measure_options(const MeasureOptions& opts);

// Throws what validate_measure_options throws, Error(internal) if the timer returns a negative or non-finite
// time; exceptions from the launch propagate.
KTUNE_API Measurement measure(Timer& timer, const std::function<void()>& launch_once, const MeasureOptions& opts);

// The statistics measure() reports, over any samples (sorted or not); exposed for tests and for re-reading
// stored samples. Throws Error(invalid_argument) when samples is empty.
KTUNE_API double median_of(std::vector<double> samples);
KTUNE_API double median_spread(std::vector<double> samples);

}  // namespace ktune::autotune
