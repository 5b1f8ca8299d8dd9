// Tuning workloads for the host CPU target (Arch "host"): host-memory inputs and synchronous host launches
// behind the same Workload interface as the GPU ones (the `stream` argument is ignored).
#pragma once

#include "autotune/workload.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

// Throws Error(not_found) for a family without a host workload (families with one: xqa_decode, sparse_mla_decode).
KTUNE_API WorkloadFactory host_workload_factory(const std::string& family);

}  // namespace ktune::autotune
