// sparse_mla_decode behind the uniform FamilyInfo interface (CLI, C API, tuner).
#pragma once

#include "ktune/family.hpp"

namespace ktune::mla {

FamilyInfo family_info();

}  // namespace ktune::mla
