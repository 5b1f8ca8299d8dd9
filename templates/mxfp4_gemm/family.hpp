// mxfp4_gemm behind the uniform FamilyInfo interface (CLI, C API, tuner).
#pragma once

#include <memory>
#include <string>

#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "ktune/mxfp4_gemm.hpp"

namespace ktune::mxfp4 {

FamilyInfo family_info();

// The C argument struct as the C++ call takes it (c_op.cpp); the caller has checked its struct_size and family_id.
Mxfp4GemmArgs args_from_c(const Problem& problem, const ktune_mxfp4_args& args);
// FamilyInfo::prepare_c_op: the prepared op behind ktune_op_prepare.
std::unique_ptr<COp> prepare_c_op(Runtime& rt, const std::string& problem_key);
// FamilyInfo::workload / host_workload: the tuner's inputs (workload.cpp, workload_host.cpp; built into
// autotune/, bucket m = tokens).
std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets);
std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                       const TuningBuckets& buckets);

}  // namespace ktune::mxfp4
