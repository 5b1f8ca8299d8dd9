// What the tuner and the families' tuning workloads need of the GPU besides launching: device memory, a
// stream, an event pair to time launches, and whether a GPU is there at all -- without the driver table.
// Every call works on the calling thread's current context; failures throw Error(cuda_error) naming `what`.
#pragma once

#include <cstddef>

namespace ktune::internal {

// True when the driver loads and the calling thread has a current context (what a tuning run needs).
bool gpu_context_current();

// The current context's device: ordinal (CUdevice) and free / total memory.
int current_device_ordinal();
struct MemoryInfo {
  size_t free_bytes = 0, total_bytes = 0;
};
MemoryInfo device_memory_info();

// Waits for all work of the current context (cuCtxSynchronize).
void synchronize_device(const char* what);

// Device memory on the current context, freed on destruction. Movable, not copyable.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(size_t bytes, const char* what);  // at least 16 bytes are allocated
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& o) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return ptr_; }
  size_t bytes() const { return bytes_; }
  // Synchronous copies of n bytes at `offset` into the buffer.
  void upload(const void* src, size_t n, size_t offset = 0) const;
  void download(void* dst, size_t n, size_t offset = 0) const;

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

// A non-blocking stream of the current context, destroyed with this object.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  void* get() const { return stream_; }  // a CUstream
  void synchronize(const char* what) const;

 private:
  void* stream_ = nullptr;
};

// Two events on one stream: record start, enqueue work, record stop, then elapsed_ms() waits for the stop
// event and returns the time between them.
class EventTimer {
 public:
  EventTimer();
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  void start(void* stream);
  void stop(void* stream);
  float elapsed_ms();

 private:
  void* start_ = nullptr;
  void* stop_ = nullptr;
};

}  // namespace ktune::internal
