// The device Timer: CUDA events around `iters` launches on one stream (inputs rotate inside the workload, so
// repeated launches do not measure L2).
#pragma once

#include <memory>

#include "autotune/measure.hpp"
#include "ktune/export.hpp"

namespace ktune::internal {
class EventTimer;  // ktune_internal/gpu.hpp
}

namespace ktune::autotune {

class KTUNE_API GpuTimer : public Timer {
 public:
  explicit GpuTimer(void* stream);  // CUstream of the current context
  ~GpuTimer() override;
  double time_ms(const std::function<void()>& launch_once, int iters) override;

 private:
  void* stream_;
  std::unique_ptr<internal::EventTimer> events_;
};

}  // namespace ktune::autotune
