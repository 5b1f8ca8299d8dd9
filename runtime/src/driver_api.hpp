// libcuda.so.1 loaded with dlopen: ktune never links the driver, so the library loads (and compiles, caches,
// plans) on machines without one. Every entry point the runtime uses is a member here.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

namespace ktune::detail {

struct DriverApi {
// The macro expands cuda.h's versioned aliases (cuMemAlloc -> cuMemAlloc_v2) before taking the symbol name.
#define KTUNE_DRIVER_FUNCTIONS(X)                                                                           \
  X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGet) X(cuDeviceGetCount)  \
  X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDeviceTotalMem) X(cuDeviceGetUuid)                         \
  X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) X(cuDevicePrimaryCtxGetState) X(cuCtxGetCurrent) \
  X(cuCtxSetCurrent)                                                                                        \
  X(cuCtxGetId) X(cuCtxGetDevice) X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload)                 \
  X(cuModuleGetFunction) X(cuModuleGetGlobal) X(cuFuncSetAttribute) X(cuFuncGetAttribute)                   \
  X(cuLaunchKernel) X(cuLaunchKernelEx) X(cuMemAlloc) X(cuMemFree) X(cuMemcpyHtoD) X(cuMemcpyDtoH)          \
  X(cuMemsetD8) X(cuMemsetD32) X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize)                  \
  X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) X(cuEventSynchronize) X(cuEventElapsedTime)           \
  X(cuMemcpyDtoD) X(cuMemGetInfo) X(cuStreamBeginCapture) X(cuStreamEndCapture)                             \
  X(cuGraphInstantiateWithFlags) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy)                   \
  X(cuMemHostAlloc) X(cuMemHostGetDevicePointer) X(cuMemFreeHost) X(cuTensorMapEncodeTiled)                 \
  X(cuGraphGetNodes) X(cuGraphKernelNodeGetParams)

#define KTUNE_DECLARE(name) decltype(&::name) name = nullptr;
  KTUNE_DRIVER_FUNCTIONS(KTUNE_DECLARE)
#undef KTUNE_DECLARE

  std::string library_path;  // where libcuda was found
};

// The process-wide driver table, loaded and cuInit'ed on first use. Throws Error(no_driver) naming what is
// missing (library not found, no device, cuInit failure).
const DriverApi& driver();
// Like driver() but returns nullptr (and the reason) instead of throwing.
const DriverApi* try_driver(std::string* why_not = nullptr);

// Throws Error(cuda_error) with the driver's name and text for `result`, naming `what` (the call and context).
void check_cu(CUresult result, const char* what);

// The identity of `ctx` for the life of the process: its driver ID (cuCtxGetId) plus one, so that no live
// context's identity is 0; 0 when `ctx` is null or not a live context. A destroyed context's handle value can
// come back for the next context created (a primary context reset, a cuCtxDestroy then cuCtxCreate), and its
// modules, plans and fault records are gone with it: whatever is remembered per context is keyed by this, never
// by the handle.
uint64_t context_id(CUcontext ctx);
// The calling thread's current context (*handle; null when none is current) and its identity, 0 when none is
// current. A current context the driver no longer knows (destroyed, or a primary context reset and not retained
// again) is Error(cuda_error) with the driver's reason, not "none current".
uint64_t current_context_id(CUcontext* handle);

// Device `ordinal`'s primary context, retained once per process and ordinal (the reference is held for the
// process's life, so asking again per call or per thread never grows the driver's count), and retained again
// when a primary context reset (cudaDeviceReset) has left it inactive, which re-creates it.
// Error(invalid_argument) for an ordinal this machine does not have.
CUcontext retained_primary_context(int ordinal);
// The context retained_primary_context(ordinal) returned before, or null when it was not asked for yet (a
// lookup without a driver call, for a hot path).
CUcontext known_primary_context(int ordinal);

}  // namespace ktune::detail
