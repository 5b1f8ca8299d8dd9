// mxfp4_gemm behind the uniform FamilyInfo interface (CLI, C API, tuner).
#pragma once

#include "ktune/family.hpp"

namespace ktune::mxfp4 {

FamilyInfo family_info();

}  // namespace ktune::mxfp4
