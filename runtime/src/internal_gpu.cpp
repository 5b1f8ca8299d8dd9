// runtime/internal/ktune_internal/gpu.hpp over the driver table.
#include <cstdint>
#include <utility>

#include "driver_api.hpp"
#include "ktune_internal/gpu.hpp"

namespace ktune::internal {

using detail::check_cu;
using detail::driver;
using detail::DriverApi;
using detail::try_driver;

namespace {
CUdeviceptr dptr(void* p) { return static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p)); }
}  // namespace

bool gpu_context_current() {
  const DriverApi* cu = try_driver();
  CUcontext ctx = nullptr;
  return cu && cu->cuCtxGetCurrent(&ctx) == CUDA_SUCCESS && ctx != nullptr;
}

int current_device_ordinal() {
  CUdevice dev = 0;
  check_cu(driver().cuCtxGetDevice(&dev), "cuCtxGetDevice");
  return static_cast<int>(dev);
}

MemoryInfo device_memory_info() {
  MemoryInfo m;
  check_cu(driver().cuMemGetInfo(&m.free_bytes, &m.total_bytes), "cuMemGetInfo");
  return m;
}

void synchronize_device(const char* what) { check_cu(driver().cuCtxSynchronize(), what); }

DeviceBuffer::DeviceBuffer(size_t bytes, const char* what) : bytes_(bytes) {
  CUdeviceptr p = 0;
  check_cu(driver().cuMemAlloc(&p, bytes < 16 ? 16 : bytes), what);
  ptr_ = reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

DeviceBuffer::~DeviceBuffer() {
  if (ptr_)
    if (const DriverApi* cu = try_driver()) cu->cuMemFree(dptr(ptr_));
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& o) noexcept : ptr_(o.ptr_), bytes_(o.bytes_) {
  o.ptr_ = nullptr;
  o.bytes_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& o) noexcept {
  std::swap(ptr_, o.ptr_);
  std::swap(bytes_, o.bytes_);
  return *this;
}

void DeviceBuffer::upload(const void* src, size_t n, size_t offset) const {
  check_cu(driver().cuMemcpyHtoD(dptr(ptr_) + offset, src, n), "cuMemcpyHtoD");
}

void DeviceBuffer::download(void* dst, size_t n, size_t offset) const {
  check_cu(driver().cuMemcpyDtoH(dst, dptr(ptr_) + offset, n), "cuMemcpyDtoH");
}

Stream::Stream() {
  CUstream s = nullptr;
  check_cu(driver().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  stream_ = s;
}

Stream::~Stream() {
  if (stream_)
    if (const DriverApi* cu = try_driver()) cu->cuStreamDestroy(static_cast<CUstream>(stream_));
}

void Stream::synchronize(const char* what) const {
  check_cu(driver().cuStreamSynchronize(static_cast<CUstream>(stream_)), what);
}

EventTimer::EventTimer() {
  const DriverApi& cu = driver();
  CUevent a = nullptr, b = nullptr;
  check_cu(cu.cuEventCreate(&a, CU_EVENT_DEFAULT), "cuEventCreate");
  start_ = a;
  check_cu(cu.cuEventCreate(&b, CU_EVENT_DEFAULT), "cuEventCreate");
  stop_ = b;
}

EventTimer::~EventTimer() {
  if (const DriverApi* cu = try_driver()) {
    if (start_) cu->cuEventDestroy(static_cast<CUevent>(start_));
    if (stop_) cu->cuEventDestroy(static_cast<CUevent>(stop_));
  }
}

void EventTimer::start(void* stream) {
  check_cu(driver().cuEventRecord(static_cast<CUevent>(start_), static_cast<CUstream>(stream)), "cuEventRecord");
}

void EventTimer::stop(void* stream) {
  check_cu(driver().cuEventRecord(static_cast<CUevent>(stop_), static_cast<CUstream>(stream)), "cuEventRecord");
}

float EventTimer::elapsed_ms() {
  const DriverApi& cu = driver();
  check_cu(cu.cuEventSynchronize(static_cast<CUevent>(stop_)), "cuEventSynchronize (a launch faulted?)");
  float ms = 0;
  check_cu(cu.cuEventElapsedTime(&ms, static_cast<CUevent>(start_), static_cast<CUevent>(stop_)),
           "cuEventElapsedTime");
  return ms;
}

}  // namespace ktune::internal
