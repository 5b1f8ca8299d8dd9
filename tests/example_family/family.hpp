// example_scale's registry entry and the tuner's inputs (workload.cpp).
#pragma once

#include <memory>
#include <string>

#include "example_family/scale.hpp"
#include "ktune/family.hpp"

namespace ktune::example {

FamilyInfo family_info();

// FamilyInfo::workload / host_workload: rotating inputs of one (problem, bucket m = rows).
std::unique_ptr<autotune::Workload> make_workload(Runtime& rt, const std::string& problem_key, const TuningBuckets& buckets);
std::unique_ptr<autotune::Workload> make_host_workload(Runtime& rt, const std::string& problem_key,
                                                       const TuningBuckets& buckets);

// The most of this family's workloads (GPU and host) that have existed at once since the last reset: what the
// tests check a replay against (one op's inputs at a time).
int most_workloads_alive();
void reset_most_workloads_alive();

}  // namespace ktune::example
