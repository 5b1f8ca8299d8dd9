// The runtime side of runtime/internal/ktune_internal/*.hpp: the services templates/, autotune/ and tools/ may use.
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>

#include <fmt/format.h>

#include "driver_api.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune_internal/context.hpp"
#include "ktune_internal/runtime_access.hpp"
#include "ktune_internal/tensor_map.hpp"
#include "runtime_impl.hpp"

namespace ktune::internal {

void* current_context() {
  CUcontext ctx = nullptr;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(detail::current_context_id(&ctx)));
}

const DeviceFacts& device_facts(void* ctx, const char* family) {
  if (!ctx)
    throw Error(Status::cuda_error, family,
                "no current CUDA context on this thread: make one current first (torch.cuda.set_device, "
                "cuCtxSetCurrent, or ktune::use_device)");
  // One context is usually current for a thread's whole life: remember the last one's facts.
  thread_local void* last_ctx = nullptr;
  thread_local const DeviceFacts* last = nullptr;
  if (ctx == last_ctx && last) return *last;

  const detail::DriverApi& cu = detail::driver();
  CUdevice dev = 0;  // of the current context, which is `ctx`
  detail::check_cu(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  const int ordinal = static_cast<int>(dev);  // CUdevice is the ordinal

  static std::mutex mutex;
  static std::array<std::unique_ptr<DeviceFacts>, 64> facts;
  if (ordinal < 0 || ordinal >= static_cast<int>(facts.size()))
    throw Error(Status::unsupported, family, fmt::format("device ordinal {} beyond the 64 ktune tracks", ordinal));
  std::lock_guard<std::mutex> lock(mutex);
  if (!facts[ordinal]) {
    auto f = std::make_unique<DeviceFacts>();
    int major = 0, minor = 0;
    detail::check_cu(cu.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev),
                     "cuDeviceGetAttribute(cc major)");
    detail::check_cu(cu.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev),
                     "cuDeviceGetAttribute(cc minor)");
    f->arch = arch_for_compute_capability(major, minor);
    f->limits = device_limits(ordinal);
    int threads = 0;
    if (cu.cuDeviceGetAttribute(&threads, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, dev) == CUDA_SUCCESS && threads > 0)
      f->limits.max_threads_per_block = threads;
    f->ordinal = ordinal;
    facts[ordinal] = std::move(f);
  }
  last_ctx = ctx;
  last = facts[ordinal].get();
  return *last;
}

void encode_bf16_tile_map_2d(void* out, const void* base, uint64_t cols, uint64_t rows, uint64_t row_stride_bytes,
                             uint32_t box_cols, uint32_t box_rows, const char* what) {
  const cuuint64_t dims[2] = {cols, rows};
  const cuuint64_t strides[1] = {row_stride_bytes};
  const cuuint32_t box[2] = {box_cols, box_rows};
  const cuuint32_t elem_strides[2] = {1, 1};
  CUtensorMap map;
  detail::check_cu(detail::driver().cuTensorMapEncodeTiled(
                       &map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<void*>(base), dims, strides, box,
                       elem_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                       CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
                   what);
  std::memcpy(out, &map, sizeof(map));
}

std::shared_ptr<void> runtime_slot(Runtime& rt, const std::string& name,
                                   const std::function<std::shared_ptr<void>()>& make) {
  Runtime::Impl& impl = RuntimeImplAccess::of(rt);
  std::lock_guard<std::mutex> lock(impl.slots_mutex);
  auto it = impl.slots.find(name);
  if (it != impl.slots.end()) return it->second;
  return impl.slots.emplace(name, make()).first->second;
}

uint64_t tuning_generation(const Runtime& rt) {
  return RuntimeImplAccess::of(rt).tuning_generation.load(std::memory_order_acquire);
}

}  // namespace ktune::internal
