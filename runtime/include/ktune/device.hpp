// What is on this machine: driver, NVRTC, devices. Never throws for a missing driver or compiler: that is
// reported in the fields, so `ktune info` works everywhere.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/export.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune {

// The roofline ceilings of a device: peak DRAM bandwidth and peak dense BF16 tensor-core FLOP/s (0 = unknown).
// Stored with the device fingerprint in every tuning row (autotune/tuning_record.hpp), so `ktune report` can
// place each winner on a roofline. `source` says how they were obtained (computed from driver attributes and
// a per-arch table for GPUs, measured for the host CPU); see docs/report.md.
struct KTUNE_API DeviceCeilings {
  double peak_bytes_per_s = 0;
  double peak_flops = 0;
  std::string source;
};

struct KTUNE_API DeviceInfo {
  int ordinal = 0;
  std::string name;
  int cc_major = 0, cc_minor = 0;
  std::string arch;  // the arch ktune compiles for it, e.g. "sm_90a"
  int sm_count = 0;
  int64_t total_memory_bytes = 0;
  int memory_clock_khz = 0;
  int l2_bytes = 0;
  int smem_per_block_optin = 0;
  // Identifies tuning results that transfer: same name, capability, SM count, memory clock and driver.
  std::string fingerprint;
  DeviceCeilings ceilings;  // theoretical peaks at the reported clocks (see gpu_ceilings)
};

struct KTUNE_API SystemInfo {
  bool driver_loaded = false;
  std::string driver_path, driver_error;
  int driver_version = 0;  // e.g. 13000
  bool nvrtc_loaded = false;
  std::string nvrtc_path, nvrtc_version, nvrtc_error;
  std::vector<DeviceInfo> devices;
};

KTUNE_API SystemInfo system_info();
// Limits of device `ordinal` (throws without a driver).
KTUNE_API DeviceLimits device_limits(int ordinal);
// Published limits of an arch, for planning without a device.
KTUNE_API DeviceLimits arch_limits(const Arch& arch);
// Ceilings of a GPU from its driver attributes: bandwidth = 2 (double data rate) x memory clock x bus width;
// FLOP/s = dense BF16 tensor FLOP per clock per SM (a per-arch table: sm_80 2048, sm_90 4096, sm_100/103 8192;
// other arches 0 = unknown) x SM count x SM clock. Pure arithmetic; an unknown input gives 0 for that ceiling.
KTUNE_API DeviceCeilings gpu_ceilings(int cc_major, int cc_minor, int sm_count, int sm_clock_khz,
                                      int memory_clock_khz, int memory_bus_width_bits);
// The ceilings of device `ordinal` (throws without a driver).
KTUNE_API DeviceCeilings device_ceilings(int ordinal);

}  // namespace ktune
