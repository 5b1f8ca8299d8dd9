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

// An attribute that may be missing on some driver: 0 instead of an error (only the ceilings use these).
int attr_or_zero(const DriverApi& cu, CUdevice dev, CUdevice_attribute a) {
  int v = 0;
  return cu.cuDeviceGetAttribute(&v, a, dev) == CUDA_SUCCESS ? v : 0;
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
  d.ceilings = gpu_ceilings(d.cc_major, d.cc_minor, d.sm_count, attr_or_zero(cu, dev, CU_DEVICE_ATTRIBUTE_CLOCK_RATE),
                            d.memory_clock_khz, attr_or_zero(cu, dev, CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH));
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

DeviceCeilings gpu_ceilings(int cc_major, int cc_minor, int sm_count, int sm_clock_khz, int memory_clock_khz,
                            int memory_bus_width_bits) {
  DeviceCeilings c;
  if (memory_clock_khz > 0 && memory_bus_width_bits > 0)
    c.peak_bytes_per_s = 2.0 * memory_clock_khz * 1e3 * (memory_bus_width_bits / 8.0);
  // Dense BF16 (FP32 accumulate) tensor-core FLOP per clock per SM: A100 312 TFLOP/s = 108 SMs x 1.41 GHz x 2048;
  // H100 SXM 989 TFLOP/s = 132 x 1.83 GHz x 4096; B200 2.25 PFLOP/s ~ 148 x 1.86 GHz x 8192. Consumer parts of
  // sm_86/89/120 run BF16 at different rates per SKU, so they are left unknown.
  int per_clock = 0;
  switch (cc_major * 10 + cc_minor) {
    case 80: per_clock = 2048; break;
    case 90: per_clock = 4096; break;
    case 100: case 103: per_clock = 8192; break;
    default: break;
  }
  if (per_clock && sm_count > 0 && sm_clock_khz > 0) c.peak_flops = double(per_clock) * sm_count * sm_clock_khz * 1e3;
  c.source = fmt::format("computed: bandwidth = 2 x memory clock ({} MHz) x bus width ({} bit); FLOP/s = {}",
                         memory_clock_khz / 1000, memory_bus_width_bits,
                         per_clock ? fmt::format("{} dense BF16 FLOP/clk/SM (sm_{}{} table) x {} SMs x {} MHz", per_clock,
                                                 cc_major, cc_minor, sm_count, sm_clock_khz / 1000)
                                   : fmt::format("unknown for sm_{}{}", cc_major, cc_minor));
  return c;
}

DeviceCeilings device_ceilings(int ordinal) {
  const DriverApi& cu = driver();
  int drv = 0;
  cu.cuDriverGetVersion(&drv);
  return describe(cu, ordinal, drv).ceilings;
}

DeviceLimits arch_limits(const Arch& arch) {
  // Published figures of each arch's largest part (sm_121: GB10). An arch not listed gets the conservative
  // 99 KiB of shared memory per block, so a config chosen without a device never over-asks.
  DeviceLimits l;
  switch (arch.sm()) {
    case 80: l.sm_count = 108; l.max_smem_per_block_optin = 163 * 1024; l.l2_bytes = 40 << 20; break;
    case 86: l.sm_count = 84; l.max_smem_per_block_optin = 99 * 1024; l.l2_bytes = 6 << 20; break;
    case 89: l.sm_count = 128; l.max_smem_per_block_optin = 99 * 1024; l.l2_bytes = 72 << 20; break;
    case 90: l.sm_count = 132; l.max_smem_per_block_optin = 227 * 1024; l.l2_bytes = 50 << 20; break;
    case 100: case 103: l.sm_count = 148; l.max_smem_per_block_optin = 227 * 1024; l.l2_bytes = 126 << 20; break;
    case 120: l.sm_count = 170; l.max_smem_per_block_optin = 99 * 1024; l.l2_bytes = 96 << 20; break;
    case 121: l.sm_count = 48; l.max_smem_per_block_optin = 99 * 1024; l.l2_bytes = 24 << 20; break;
    default: l.max_smem_per_block_optin = 99 * 1024; break;
  }
  return l;
}

}  // namespace ktune
