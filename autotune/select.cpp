#include "autotune/select.hpp"

#include <cmath>

#include <fmt/format.h>

#include "ktune/error.hpp"

namespace ktune::autotune {
namespace {

constexpr size_t kErrorsQuoted = 3;

bool usable(const CandidateResult& c) { return c.ok && std::isfinite(c.m.median_ms) && c.m.median_ms >= 0; }

[[noreturn]] void throw_none_usable(const std::vector<CandidateResult>& candidates) {
  std::string quoted;
  size_t shown = 0;
  for (const auto& c : candidates) {
    if (shown == kErrorsQuoted) break;
    std::string why = c.ok ? fmt::format("timing not usable (median {} ms)", c.m.median_ms)
                           : (c.error.empty() ? std::string("failed (no message)") : c.error);
    quoted += fmt::format("{}[{}] {}", shown ? "; " : "", c.config, why);
    ++shown;
  }
  if (candidates.size() > shown) quoted += fmt::format("; and {} more", candidates.size() - shown);
  throw Error(Status::unsupported, "autotune", "no candidate compiled and ran: " + quoted);
}

}  // namespace

size_t select_winner(const std::vector<CandidateResult>& candidates, double noise_fraction) {
  if (candidates.empty())
    throw Error(Status::invalid_argument, "autotune", "select_winner: candidates: expected at least one, got none");
  if (!(noise_fraction >= 0) || !std::isfinite(noise_fraction))
    throw Error(Status::invalid_argument, "autotune",
                fmt::format("select_winner: noise_fraction: expected a finite fraction >= 0, got {}", noise_fraction));
  double best = INFINITY;
  for (const auto& c : candidates)
    if (usable(c) && c.m.median_ms < best) best = c.m.median_ms;
  if (!std::isfinite(best)) throw_none_usable(candidates);
  const double limit = best * (1 + noise_fraction);
  for (size_t i = 0; i < candidates.size(); ++i)
    if (usable(candidates[i]) && candidates[i].m.median_ms <= limit) return i;
  return 0;  // unreachable: the best itself is within the limit
}

}  // namespace ktune::autotune
