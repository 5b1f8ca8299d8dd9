// The steps the GPU tuner (tuner.cpp) and the host tuner (host_tuner.cpp) share around their measurement: the
// outcome's keys, compiling the candidates, and storing the result. What differs between the two (the device,
// its workload and timer, its tuned-config memo) stays in each.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autotune/tuner.hpp"
#include "autotune/workload.hpp"
#include "ktune/device.hpp"
#include "ktune/family.hpp"

namespace ktune::autotune::tune_steps {

// An outcome with the family, the canonical problem key (a bad key throws the family's error, naming the field)
// and the tuning key of `buckets`; the caller adds its device's fingerprint.
TuneOutcome begin(const FamilyInfo& family, const std::string& problem_key,
                  const std::vector<std::pair<std::string, int64_t>>& buckets);

// Finds or compiles every candidate in `configs` on `jobs` threads, then `after` (modules the candidates launch
// with, such as a problem's shared module), so result i is configs[i]. Sets out.compile_ms and out.compiled.
std::vector<CompileJobResult> compile(Runtime& rt, TuneOutcome& out, const std::vector<std::string>& configs,
                                      const std::vector<std::string>& after, const Arch& arch, int jobs);

// Stores the outcome (winner index `winner` of out.candidates) as this device's tuning row when options.persist,
// with the workload's bytes and FLOPs per call and the device's ceilings; without a writable layer it warns that
// the `what` ("tuning result", "host tuning result") is kept in memory only.
void persist(Runtime& rt, const TuneOutcome& out, size_t winner, const Workload& workload,
             const DeviceCeilings& ceilings, const std::string& compiler_version, const TuneOptions& options,
             const char* what);

}  // namespace ktune::autotune::tune_steps
