// A tuning workload: device inputs for one tuning key (problem + buckets), allocated once with fresh random
// data and rotated across several copies larger than L2, plus a launch of any candidate config on them.
// Families provide one (templates/<family>/workload.cpp); the tuner, `ktune tune`, replay and the benches use it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ktune/export.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"

namespace ktune::autotune {

// The config a family call runs and why: the family's plan (xqa_decode_plan, ..._host_plan), which resolves
// the config with the same function its launch does.
struct KTUNE_API ChosenConfig {
  std::string config;
  std::string source;  // "tuned" (this device's row in the cache), "default" or "forced"
};

// `config` in prepare/launch: a config key forces that config (the tuner's candidates); "" forces nothing, so
// the call is exactly an engine's (the runtime picks the tuned config for this device, else the default).
class KTUNE_API Workload {
 public:
  virtual ~Workload() = default;
  // Loads (compiling if allowed) the kernel for `config` so timing never includes JIT. Throws on failure.
  virtual void prepare(const std::string& config) = 0;
  // Enqueues one call with `config` on `stream`, advancing to the next rotating input copy. No sync.
  virtual void launch(const std::string& config, void* stream) = 0;
  // What a call with `config` runs ("" : what the runtime chooses for an engine call of this key).
  virtual ChosenConfig chosen(const std::string& config) = 0;
  // Bytes one call must move through device memory at least (for GB/s reporting).
  virtual double bytes_per_call() const = 0;
  // Floating-point operations of one call (for TFLOP/s reporting).
  virtual double flops_per_call() const = 0;
};

// The family call's `config` argument for a workload config: null (nothing forced) for "".
inline const char* forced_config(const std::string& config) { return config.empty() ? nullptr : config.c_str(); }

// problem_key: the family's readable key; buckets: short dim name -> bucket value (b, l, m). A family's
// FamilyInfo::workload / host_workload (templates/<family>/workload*.cpp, built into autotune/).
using WorkloadFactory = ktune::WorkloadFactory;

// The family's GPU workload. Throws Error(not_found) for an unknown family or one without a workload.
KTUNE_API WorkloadFactory workload_factory(const std::string& family);

}  // namespace ktune::autotune
