// Picking the winner of a sweep, deterministically.
//
// Taking the argmin of noisy medians lets two configs that are equally fast trade places from run to run, so
// two processes (or two boots) would serve different kernels. Instead, every config within noise of the best
// counts as a tie, and ties go to the earliest in search-space order, which specs order simple to complex with
// the default first.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "autotune/measure.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

struct CandidateResult {
  std::string config;  // readable config key, e.g. "t64.s2.w4"
  bool ok = false;     // compiled, launched and was timed
  std::string error;   // why not, when !ok
  Measurement m;       // meaningful when ok
};

// Index of the winner: among ok candidates with a finite median, b = the smallest median; the winner is the
// first such candidate (in the vector's order) whose median <= b * (1 + noise_fraction). Failed candidates are
// skipped. Throws Error(unsupported, "autotune", "no candidate compiled and ran: ...") quoting the first few
// errors when none is usable, Error(invalid_argument) when the vector is empty or noise_fraction is negative or
// not finite.
KTUNE_API size_t select_winner(const std::vector<CandidateResult>& candidates, double noise_fraction);

}  // namespace ktune::autotune
