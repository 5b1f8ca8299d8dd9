#include "autotune/gpu_timer.hpp"

#include "ktune_internal/gpu.hpp"

namespace ktune::autotune {

GpuTimer::GpuTimer(void* stream) : stream_(stream), events_(std::make_unique<internal::EventTimer>()) {}

GpuTimer::~GpuTimer() = default;

double GpuTimer::time_ms(const std::function<void()>& launch_once, int iters) {
  events_->start(stream_);
  for (int i = 0; i < iters; ++i) launch_once();
  events_->stop(stream_);
  return events_->elapsed_ms() / iters;
}

}  // namespace ktune::autotune
