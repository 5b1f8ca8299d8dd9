// Fault records of checked kernels (templates/common/checked.h): one per CUDA context, in pinned host memory
// mapped into the device's address space, so a kernel's report is readable on the host with no copy once the
// work has completed, and the address stays valid inside captured CUDA graphs.
#include <fmt/format.h>

#include <cstring>

#include "common/checked.h"
#include "driver_api.hpp"
#include "ktune/error.hpp"
#include "ktune_internal/context.hpp"
#include "ktune/runtime.hpp"
#include "runtime_impl.hpp"

namespace ktune {

using namespace detail;

namespace {

const char* check_code_name(unsigned code) {
  switch (code) {
    case ktune_common::kCheckPageIndex: return "page index";
    case ktune_common::kCheckTopkIndex: return "top-k index";
    case ktune_common::kCheckSeqLen: return "seq_len";
    case ktune_common::kCheckQueryOffset: return "q_cu_seq_lens entry";
    default: return "index";
  }
}

}  // namespace

std::string DeviceFault::message() const {
  const char* owner = what == "top-k index" ? "token" : "request";
  return fmt::format("{} {} of {} {} out of range [0, {})", what, value, owner, where, limit);
}

void* Runtime::device_report() {
  const DriverApi& cu = driver();
  void* ctx = internal::require_context("runtime");
  std::lock_guard<std::mutex> lock(impl_->reports_mutex);
  auto it = impl_->reports.find(ctx);
  if (it != impl_->reports.end()) return reinterpret_cast<void*>(static_cast<uintptr_t>(it->second.device));
  Impl::Report r;
  check_cu(cu.cuMemHostAlloc(&r.host, sizeof(ktune_common::DeviceReport),
                             CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE),
           "cuMemHostAlloc (checked-kernel fault record)");
  std::memset(r.host, 0, sizeof(ktune_common::DeviceReport));
  CUdeviceptr dev = 0;
  CUresult res = cu.cuMemHostGetDevicePointer(&dev, r.host, 0);
  if (res != CUDA_SUCCESS) {
    cu.cuMemFreeHost(r.host);
    check_cu(res, "cuMemHostGetDevicePointer (checked-kernel fault record)");
  }
  r.device = dev;
  CUcontext owner = nullptr;
  check_cu(cu.cuCtxGetCurrent(&owner), "cuCtxGetCurrent");
  r.owner = owner;
  impl_->reports.emplace(ctx, r);
  return reinterpret_cast<void*>(static_cast<uintptr_t>(dev));
}

std::optional<DeviceFault> Runtime::take_device_fault() {
  void* ctx = internal::require_context("runtime");
  std::lock_guard<std::mutex> lock(impl_->reports_mutex);
  auto it = impl_->reports.find(ctx);
  if (it == impl_->reports.end()) return std::nullopt;  // no checked kernel ran on this context
  auto* rec = static_cast<volatile ktune_common::DeviceReport*>(it->second.host);
  if (rec->code == ktune_common::kCheckOk) return std::nullopt;
  DeviceFault f;
  f.what = check_code_name(rec->code);
  f.where = rec->where;
  f.value = rec->value;
  f.limit = rec->limit;
  rec->where = 0;
  rec->value = 0;
  rec->limit = 0;
  rec->code = ktune_common::kCheckOk;  // last: a kernel may record again once code is 0
  return f;
}

void Runtime::Impl::free_reports() {
  const DriverApi* cu = try_driver();
  std::lock_guard<std::mutex> lock(reports_mutex);
  if (cu)
    for (auto& [ctx, r] : reports)  // a destroyed context freed its record with it
      if (reinterpret_cast<uintptr_t>(ctx) == context_id(static_cast<CUcontext>(r.owner)))
        cu->cuMemFreeHost(r.host);
  reports.clear();
}

}  // namespace ktune
