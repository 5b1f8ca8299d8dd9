// Measuring every candidate of a search space, where any candidate may fail.
//
// A candidate that fails to compile, load or launch is recorded with its error and the sweep goes on: one bad
// config must never stop tuning (the default config always exists as a fallback).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autotune/measure.hpp"
#include "autotune/select.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

// Compiles/loads one config and returns a closure that launches it once; throws when it cannot.
using PrepareFn = std::function<std::function<void()>(const std::string& config)>;

// One CandidateResult per config, in the given order. Any std::exception from prepare or from measuring is
// caught into CandidateResult::error (anything else as "unknown exception"); only invalid options throw.
KTUNE_API std::vector<CandidateResult> sweep(Timer& timer, const std::vector<std::string>& configs,
                                             const PrepareFn& prepare, const MeasureOptions& opts);

}  // namespace ktune::autotune
