// Tuning and replay on the host CPU target (Arch "host", the LLVM backend): the GPU flow of tuner.cpp /
// warmup.cpp with the host's pieces — host fingerprint (target id + cores), host workload, wall-clock timer,
// host tuned-config memo. tune() dispatches here (TuneOptions::host); the GPU paths are untouched. replay()
// (replay.cpp) runs host and GPU alike.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "autotune/tuner.hpp"
#include "autotune/warmup.hpp"
#include "ktune/device.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

// The measurement warmup uses for host keys (CI-sized: one warm-up call, 5 single-call samples, one more
// round if the spread is above 5%).
KTUNE_API MeasureOptions host_measure_options();

// The host CPU's roofline ceilings stored with host tuning rows: DRAM read bandwidth measured once per process
// (all hardware threads summing a 128 MiB buffer, best of 4 passes, 0.2-1 s); peak_flops 0 (not measured).
KTUNE_API DeviceCeilings host_ceilings();

// What tune() runs for the host (no CUDA context needed).
KTUNE_API TuneOutcome tune_on_host(Runtime& rt, const std::string& family, const std::string& problem_key,
                         const std::vector<std::pair<std::string, int64_t>>& buckets, const TuneOptions& options);

}  // namespace ktune::autotune
