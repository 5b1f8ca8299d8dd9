// What a host call of a family that splits its work would run: the answer of xqa_decode_host_plan and
// sparse_mla_decode_host_plan (XqaHostPlan and SparseMlaHostPlan name this type).
#pragma once

#include <cstddef>
#include <string>

#include "ktune/export.hpp"

namespace ktune {

struct KTUNE_API HostSplitPlan {
  std::string config;          // host config key
  std::string source;          // "forced", "tuned" or "default"
  int threads = 1;             // threads the call runs on
  int num_splits = 1;
  size_t workspace_bytes = 0;  // 0 when num_splits == 1
};

}  // namespace ktune
