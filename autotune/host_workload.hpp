// Tuning workloads for the host CPU target (Arch "host"): host-memory inputs and synchronous host launches
// behind the same Workload interface as the GPU ones (the `stream` argument is ignored).
#pragma once

#include "autotune/workload.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

// Throws Error(not_found) for a family without a host workload (families with one: xqa_decode,
// sparse_mla_decode, mxfp4_gemm).
KTUNE_API WorkloadFactory host_workload_factory(const std::string& family);

// The families' host workloads (autotune/<family>_host_workload.cpp), dispatched by host_workload_factory.
std::unique_ptr<Workload> make_xqa_host_workload(Runtime& rt, const std::string& problem_key,
                                                 const std::vector<std::pair<std::string, int64_t>>& buckets);
std::unique_ptr<Workload> make_sparse_mla_decode_host_workload(
    Runtime& rt, const std::string& problem_key, const std::vector<std::pair<std::string, int64_t>>& buckets);
std::unique_ptr<Workload> make_mxfp4_gemm_host_workload(Runtime& rt, const std::string& problem_key,
                                                        const std::vector<std::pair<std::string, int64_t>>& buckets);

}  // namespace ktune::autotune
