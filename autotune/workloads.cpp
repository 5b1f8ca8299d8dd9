// The tuning workloads this build knows, by family name.
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autotune/workload.hpp"
#include "ktune/error.hpp"

namespace ktune::autotune {

// autotune/xqa_workload.cpp
std::unique_ptr<Workload> make_xqa_decode_workload(Runtime& rt, const std::string& problem_key,
                                                   const std::vector<std::pair<std::string, int64_t>>& buckets);

// autotune/sparse_mla_workload.cpp
std::unique_ptr<Workload> make_sparse_mla_decode_workload(Runtime& rt, const std::string& problem_key,
                                                          const std::vector<std::pair<std::string, int64_t>>& buckets);

// autotune/mxfp4_workload.cpp
std::unique_ptr<Workload> make_mxfp4_gemm_workload(Runtime& rt, const std::string& problem_key,
                                                   const std::vector<std::pair<std::string, int64_t>>& buckets);

WorkloadFactory workload_factory(const std::string& family) {
  if (family == "xqa_decode") return make_xqa_decode_workload;
  if (family == "sparse_mla_decode") return make_sparse_mla_decode_workload;
  if (family == "mxfp4_gemm") return make_mxfp4_gemm_workload;
  throw Error(Status::not_found, "autotune",
              "no tuning workload for family '" + family + "' (families with one: xqa_decode, sparse_mla_decode, mxfp4_gemm)");
}

}  // namespace ktune::autotune
