// Tuning workloads for the host CPU target (Arch "host"): host-memory inputs and synchronous host launches
// behind the same Workload interface as the GPU ones (the `stream` argument is ignored). A family provides
// one as FamilyInfo::host_workload (templates/<family>/workload_host.cpp).
#pragma once

#include "autotune/workload.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

// The family's host workload. Throws Error(not_found) for an unknown family or one without a host workload.
KTUNE_API WorkloadFactory host_workload_factory(const std::string& family);

}  // namespace ktune::autotune
