// The host Timer: wall time (steady_clock) around `iters` synchronous calls of a host kernel. Host launches
// return when their output is written, so no event or synchronization is needed.
#pragma once

#include "autotune/measure.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

class KTUNE_API HostTimer : public Timer {
 public:
  double time_ms(const std::function<void()>& launch_once, int iters) override;
};

}  // namespace ktune::autotune
