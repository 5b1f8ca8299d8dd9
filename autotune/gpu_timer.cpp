#include "autotune/gpu_timer.hpp"

#include "driver_api.hpp"

namespace ktune::autotune {
using namespace detail;

GpuTimer::GpuTimer(void* stream) : stream_(stream) {
  const DriverApi& cu = driver();
  CUevent a = nullptr, b = nullptr;
  check_cu(cu.cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
  check_cu(cu.cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  start_ = a;
  stop_ = b;
}

GpuTimer::~GpuTimer() {
  if (const DriverApi* cu = try_driver()) {
    cu->cuEventDestroy(static_cast<CUevent>(start_));
    cu->cuEventDestroy(static_cast<CUevent>(stop_));
  }
}

double GpuTimer::time_ms(const std::function<void()>& launch_once, int iters) {
  const DriverApi& cu = driver();
  CUstream s = static_cast<CUstream>(stream_);
  check_cu(cu.cuEventRecord(static_cast<CUevent>(start_), s), "cuEventRecord");
  for (int i = 0; i < iters; ++i) launch_once();
  check_cu(cu.cuEventRecord(static_cast<CUevent>(stop_), s), "cuEventRecord");
  check_cu(cu.cuEventSynchronize(static_cast<CUevent>(stop_)), "cuEventSynchronize (a candidate kernel faulted?)");
  float ms = 0;
  check_cu(cu.cuEventElapsedTime(&ms, static_cast<CUevent>(start_), static_cast<CUevent>(stop_)), "cuEventElapsedTime");
  return ms / iters;
}

}  // namespace ktune::autotune
