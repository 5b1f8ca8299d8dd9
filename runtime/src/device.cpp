#include "ktune/device.hpp"

#include <fmt/format.h>

#include "driver_api.hpp"
#include "ktune/error.hpp"
#include "nvrtc_api.hpp"

namespace ktune {
using namespace detail;

namespace {

int attr(const DriverApi& cu, CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  check_cu(cu.cuDeviceGetAttribute(&v, a, dev), "cuDeviceGetAttribute");
  return v;
}

DeviceInfo describe(const DriverApi& cu, int ordinal, int driver_version) {
  CUdevice dev = 0;
  check_cu(cu.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
  DeviceInfo d;
  d.ordinal = ordinal;
  char name[256] = {};
  check_cu(cu.cuDeviceGetName(name, sizeof(name), dev), "cuDeviceGetName");
  d.name = name;
  d.cc_major = attr(cu, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
  d.cc_minor = attr(cu, dev, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
  d.arch = arch_for_compute_capability(d.cc_major, d.cc_minor).str();
  d.sm_count = attr(cu, dev, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT);
  size_t mem = 0;
  check_cu(cu.cuDeviceTotalMem(&mem, dev), "cuDeviceTotalMem");
  d.total_memory_bytes = static_cast<int64_t>(mem);
  d.memory_clock_khz = attr(cu, dev, CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE);
  d.l2_bytes = attr(cu, dev, CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE);
  d.smem_per_block_optin = attr(cu, dev, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
  d.fingerprint = fmt::format("{}|cc{}.{}|sm{}|memclk{}|drv{}", d.name, d.cc_major, d.cc_minor, d.sm_count,
                              d.memory_clock_khz, driver_version);
  return d;
}

}  // namespace

SystemInfo system_info() {
  SystemInfo s;
  if (const DriverApi* cu = try_driver(&s.driver_error)) {
    s.driver_loaded = true;
    s.driver_path = cu->library_path;
    cu->cuDriverGetVersion(&s.driver_version);
    int count = 0;
    if (cu->cuDeviceGetCount(&count) == CUDA_SUCCESS)
      for (int i = 0; i < count; ++i) s.devices.push_back(describe(*cu, i, s.driver_version));
  }
  if (const NvrtcApi* nv = try_nvrtc(&s.nvrtc_error)) {
    s.nvrtc_loaded = true;
    s.nvrtc_path = nv->library_path;
    s.nvrtc_version = nv->version;
  }
  return s;
}

DeviceLimits device_limits(int ordinal) {
  const DriverApi& cu = driver();
  int drv = 0;
  cu.cuDriverGetVersion(&drv);
  DeviceInfo d = describe(cu, ordinal, drv);
  DeviceLimits l;
  l.sm_count = d.sm_count;
  l.max_smem_per_block_optin = d.smem_per_block_optin;
  l.l2_bytes = d.l2_bytes;
  return l;
}

DeviceLimits arch_limits(const Arch& arch) {
  DeviceLimits l;  // defaults are the H100/H200 (sm_90) figures
  switch (arch.sm()) {
    case 80: l.sm_count = 108; l.max_smem_per_block_optin = 163 * 1024; l.l2_bytes = 40 << 20; break;
    case 86: l.sm_count = 84; l.max_smem_per_block_optin = 99 * 1024; l.l2_bytes = 6 << 20; break;
    case 89: l.sm_count = 128; l.max_smem_per_block_optin = 99 * 1024; l.l2_bytes = 72 << 20; break;
    case 90: break;
    case 100: case 103: l.sm_count = 148; l.max_smem_per_block_optin = 227 * 1024; l.l2_bytes = 126 << 20; break;
    case 120: case 121: l.sm_count = 170; l.max_smem_per_block_optin = 99 * 1024; l.l2_bytes = 96 << 20; break;
    default: break;
  }
  return l;
}

}  // namespace ktune
