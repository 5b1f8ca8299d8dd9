// The host tuning workloads by family name (autotune/host_workload.hpp).
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autotune/host_workload.hpp"
#include "ktune/error.hpp"

namespace ktune::autotune {

WorkloadFactory host_workload_factory(const std::string& family) {
  if (family == "xqa_decode") return make_xqa_host_workload;
  if (family == "sparse_mla_decode") return make_sparse_mla_decode_host_workload;
  if (family == "mxfp4_gemm") return make_mxfp4_gemm_host_workload;
  throw Error(Status::not_found, "autotune",
              "no host tuning workload for family '" + family +
                  "' (families with one: xqa_decode, sparse_mla_decode, mxfp4_gemm)");
}

}  // namespace ktune::autotune
