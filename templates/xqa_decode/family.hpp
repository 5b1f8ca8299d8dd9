// xqa_decode behind the uniform FamilyInfo interface (CLI, C API, tuner).
#pragma once

#include "ktune/family.hpp"

namespace ktune::xqa {

FamilyInfo family_info();

}  // namespace ktune::xqa
