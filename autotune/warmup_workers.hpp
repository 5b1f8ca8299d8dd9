// warmup()'s side of the worker processes (WarmupOptions::devices / host_workers): which arches they tune,
// and phase 2 for those keys through autotune/worker_pool.hpp.
#pragma once

#include <chrono>
#include <set>
#include <string>
#include <vector>

#include "autotune/worker_pool.hpp"
#include "autotune/warmup.hpp"

namespace ktune::autotune {

// The arches the workers tune: each listed GPU's (from the driver, no context needed) and "host" with host
// workers; empty without workers. Throws Error(invalid_argument, "warmup") for a negative host_workers or a
// device that is not this machine's or is listed twice.
std::set<std::string> worker_arches(const WarmupOptions& opt);

// How long a claim of one key (claim_key) waits for another process tuning it: what is left of opt's budget
// since wall0, at most kTuningFlightWait_s and, with a key timeout, half of it (a worker that waited still has to
// tune the key within the timeout).
double flight_wait_s(const WarmupOptions& opt, std::chrono::steady_clock::time_point wall0);

// Tunes `tasks` in the workers and adds one report item per outcome to `report` (a key tuned for two
// fingerprints reports twice), `items[i]` being task i's item so far; counts tuned / done earlier / skipped /
// failed and the workers lost. wall0: the warmup's start, for the budget.
void tune_in_workers(Runtime& rt, const WarmupOptions& opt, const std::vector<PoolTask>& tasks,
                     const std::vector<WarmupItem>& items, std::chrono::steady_clock::time_point wall0,
                     WarmupReport& report);

}  // namespace ktune::autotune
