// The device Timer: CUDA events around `iters` launches on one stream (inputs rotate inside the workload, so
// repeated launches do not measure L2).
#pragma once

#include "autotune/measure.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

class KTUNE_API GpuTimer : public Timer {
 public:
  explicit GpuTimer(void* stream);  // CUstream of the current context
  ~GpuTimer() override;
  double time_ms(const std::function<void()>& launch_once, int iters) override;

 private:
  void* stream_;
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace ktune::autotune
