// xqa_decode behind the uniform FamilyInfo interface (CLI, C API, tuner).
#pragma once

#include <memory>
#include <string>

#include "ktune/family.hpp"
#include "ktune/ktune.h"
#include "ktune/xqa_decode.hpp"

namespace ktune::xqa {

FamilyInfo family_info();

// The C argument struct as the C++ call takes it (c_op.cpp); the caller has checked its struct_size and family_id.
XqaDecodeArgs args_from_c(const Problem& problem, const ktune_xqa_args& args);
// FamilyInfo::prepare_c_op: the prepared op behind ktune_op_prepare.
std::unique_ptr<COp> prepare_c_op(Runtime& rt, const std::string& problem_key);

}  // namespace ktune::xqa
