// A scripted stand-in for the GPU timer: each candidate has a base time plus seeded noise, optionally a
// disturbed start, optionally a failing launch. Deterministic for a given seed on every platform (its own
// generator, no std distributions).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <stdexcept>
#include <string>

#include "autotune/measure.hpp"

namespace ktune_test {

class FakeTimer : public ktune::autotune::Timer {
 public:
  struct Script {
    double base_ms = 1.0;
    double noise = 0.002;       // each time is base * (1 + u), u uniform in [-noise, +noise]
    int noisy_calls = 0;        // the first this many time_ms calls for the candidate are disturbed...
    double disturbance = 0.8;   // ...by an extra uniform [0, disturbance] * base
    bool launch_fails = false;  // the launch throws, as a kernel failing to launch would
  };

  explicit FakeTimer(uint64_t seed) : state_(seed * 0x9E3779B97F4A7C15ull + 1) {}

  void script(const std::string& config, Script s) { scripts_[config] = s; }

  // The closure a sweep measures: launching it tells the timer which candidate runs.
  std::function<void()> launcher(const std::string& config) {
    return [this, config] {
      current_ = config;
      ++launches_[config];
      if (scripts_.at(config).launch_fails) throw std::runtime_error("launch failed: too many resources requested");
    };
  }

  double time_ms(const std::function<void()>& launch_once, int iters) override {
    current_.clear();
    for (int i = 0; i < iters; ++i) launch_once();
    const Script& s = scripts_.at(current_);
    int call = calls_[current_]++;
    double t = s.base_ms * (1 + s.noise * (2 * uniform() - 1));
    if (call < s.noisy_calls) t += s.base_ms * s.disturbance * uniform();
    return t;
  }

  int calls(const std::string& config) const { return calls_.count(config) ? calls_.at(config) : 0; }
  int launches(const std::string& config) const { return launches_.count(config) ? launches_.at(config) : 0; }

 private:
  double uniform() {  // splitmix64 -> [0, 1)
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
  }

  uint64_t state_;
  std::string current_;
  std::map<std::string, Script> scripts_;
  std::map<std::string, int> calls_, launches_;
};

}  // namespace ktune_test
