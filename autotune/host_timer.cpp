#include "autotune/host_timer.hpp"

#include <chrono>

namespace ktune::autotune {

double HostTimer::time_ms(const std::function<void()>& launch_once, int iters) {
  if (iters < 1) iters = 1;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < iters; ++i) launch_once();
  const auto t1 = std::chrono::steady_clock::now();
  return std::chrono::duration<double, std::milli>(t1 - t0).count() / iters;
}

}  // namespace ktune::autotune
