// The tuning workloads of the registered families (FamilyInfo::workload / host_workload).
#include <string>

#include "autotune/host_workload.hpp"
#include "autotune/workload.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"

namespace ktune::autotune {
namespace {

WorkloadFactory factory(const std::string& name, WorkloadFactory FamilyInfo::*which, const char* what) {
  const FamilyInfo& f = family(name);
  if (f.*which) return f.*which;
  std::string with;
  for (const auto& g : families())
    if (g.*which) with += (with.empty() ? "" : ", ") + g.name;
  throw Error(Status::not_found, "autotune",
              "no " + std::string(what) + " for family '" + name + "' (families with one: " + with + ")");
}

}  // namespace

WorkloadFactory workload_factory(const std::string& family) {
  return factory(family, &FamilyInfo::workload, "tuning workload");
}

WorkloadFactory host_workload_factory(const std::string& family) {
  return factory(family, &FamilyInfo::host_workload, "host tuning workload");
}

}  // namespace ktune::autotune
