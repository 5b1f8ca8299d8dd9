// A tuning workload: device inputs for one tuning key (problem + buckets), allocated once with fresh random
// data and rotated across several copies larger than L2, plus a launch of any candidate config on them.
// Families provide one (autotune/<family>_workload.cpp); the tuner, `ktune tune` and the benches use it.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ktune/export.hpp"
#include "ktune/runtime.hpp"

namespace ktune::autotune {

class KTUNE_API Workload {
 public:
  virtual ~Workload() = default;
  // Loads (compiling if allowed) the kernel for `config` so timing never includes JIT. Throws on failure.
  virtual void prepare(const std::string& config) = 0;
  // Enqueues one call with `config` on `stream`, advancing to the next rotating input copy. No sync.
  virtual void launch(const std::string& config, void* stream) = 0;
  // Bytes one call must move through device memory at least (for GB/s reporting).
  virtual double bytes_per_call() const = 0;
  // Floating-point operations of one call (for TFLOP/s reporting).
  virtual double flops_per_call() const = 0;
};

// problem_key: the family's readable key; buckets: short dim name -> bucket value (b, l, m).
using WorkloadFactory = std::function<std::unique_ptr<Workload>(
    Runtime& rt, const std::string& problem_key, const std::vector<std::pair<std::string, int64_t>>& buckets)>;

// Throws Error(not_found) for a family without a workload.
KTUNE_API WorkloadFactory workload_factory(const std::string& family);

}  // namespace ktune::autotune
