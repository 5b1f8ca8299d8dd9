#include <cstring>

#include <fmt/format.h>

#include "driver_api.hpp"
#include "ktune/error.hpp"
#include "ktune/launch.hpp"

namespace ktune {
using namespace detail;

KernelResources kernel_resources(const LoadedKernel& kernel, int entry) {
  if (entry < 0 || entry >= static_cast<int>(kernel.functions.size()))
    throw Error(Status::internal, "launch", fmt::format("{}: no entry point {}", kernel.name, entry));
  const DriverApi& cu = driver();
  CUfunction fn = static_cast<CUfunction>(kernel.functions[entry]);
  KernelResources r;
  check_cu(cu.cuFuncGetAttribute(&r.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, fn), "cuFuncGetAttribute(regs)");
  check_cu(cu.cuFuncGetAttribute(&r.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, fn), "cuFuncGetAttribute(local)");
  check_cu(cu.cuFuncGetAttribute(&r.static_smem_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn), "cuFuncGetAttribute(smem)");
  check_cu(cu.cuFuncGetAttribute(&r.max_threads_per_block, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, fn),
           "cuFuncGetAttribute(max threads)");
  return r;
}

void launch_raw(const LoadedKernel& kernel, int entry, const LaunchDims& dims, const LaunchStream& stream,
                void** args) {
  if (entry < 0 || entry >= static_cast<int>(kernel.functions.size()))
    throw Error(Status::internal, "launch", fmt::format("{}: no entry point {}", kernel.name, entry));
  const DriverApi& cu = driver();
  CUlaunchConfig cfg;
  std::memset(&cfg, 0, sizeof(cfg));
  cfg.gridDimX = dims.grid[0];
  cfg.gridDimY = dims.grid[1];
  cfg.gridDimZ = dims.grid[2];
  cfg.blockDimX = dims.block[0];
  cfg.blockDimY = dims.block[1];
  cfg.blockDimZ = dims.block[2];
  cfg.sharedMemBytes = dims.dynamic_smem_bytes;
  cfg.hStream = static_cast<CUstream>(stream.stream);
  CUlaunchAttribute attr;
  std::memset(&attr, 0, sizeof(attr));
  if (stream.pdl) {
    attr.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attr.value.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = &attr;
    cfg.numAttrs = 1;
  }
  CUresult r = cu.cuLaunchKernelEx(&cfg, static_cast<CUfunction>(kernel.functions[entry]), args, nullptr);
  if (r != CUDA_SUCCESS)
    check_cu(r, fmt::format("launch of {} entry {} grid ({},{},{}) block ({},{},{}) smem {}{}", kernel.name, entry,
                            dims.grid[0], dims.grid[1], dims.grid[2], dims.block[0], dims.block[1], dims.block[2],
                            dims.dynamic_smem_bytes, stream.pdl ? " (programmatic dependent launch)" : "")
                    .c_str());
}

}  // namespace ktune
