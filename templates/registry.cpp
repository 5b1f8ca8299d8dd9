// The families compiled into this build. Adding a family = one entry here (explicit, so no static
// registration is silently dropped by a static link).
#include <fmt/format.h>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "templates/xqa_decode/family.hpp"
#include "templates/sparse_mla_decode/family.hpp"  // sparse_mla_decode
#include "templates/mxfp4_gemm/family.hpp"         // mxfp4_gemm

namespace ktune {

const std::vector<FamilyInfo>& families() {
  static const std::vector<FamilyInfo> all = {xqa::family_info(), mla::family_info(), mxfp4::family_info()};
  return all;
}

const FamilyInfo& family(const std::string& name) {
  std::string known;
  for (const auto& f : families()) {
    if (f.name == name) return f;
    known += (known.empty() ? "" : ", ") + f.name;
  }
  throw Error(Status::not_found, "families", fmt::format("unknown family '{}': expected one of {}", name, known));
}

}  // namespace ktune
