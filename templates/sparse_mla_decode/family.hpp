// sparse_mla_decode behind the uniform FamilyInfo interface (CLI, C API, tuner).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "ktune/sparse_mla_decode.hpp"

namespace ktune::mla {

FamilyInfo family_info();

// struct_size of ktune_sparse_mla_args before its q strides.
inline constexpr uint32_t kCArgsSizeBeforeStrides = offsetof(ktune_sparse_mla_args, q_stride_token);

// The C argument struct as the C++ call takes it (c_op.cpp); the caller has checked its struct_size and family_id.
SparseMlaDecodeArgs args_from_c(const Problem& problem, const ktune_sparse_mla_args& args);
// FamilyInfo::prepare_c_op: the prepared op behind ktune_op_prepare.
std::unique_ptr<COp> prepare_c_op(Runtime& rt, const std::string& problem_key);
// FamilyInfo::workload / host_workload: the tuner's inputs (workload.cpp, workload_host.cpp; built into
// autotune/, bucket b = requests).
std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets);
std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                       const TuningBuckets& buckets);

}  // namespace ktune::mla
