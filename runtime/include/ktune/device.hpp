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

}  // namespace ktune
