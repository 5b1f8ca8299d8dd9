#include "autotune/sweep.hpp"

#include <exception>
#include <stdexcept>

namespace ktune::autotune {

std::vector<CandidateResult> sweep(Timer& timer, const std::vector<std::string>& configs, const PrepareFn& prepare,
                                   const MeasureOptions& opts) {
  validate_measure_options(opts);  // a caller's mistake, not every candidate's failure
  std::vector<CandidateResult> out;
  out.reserve(configs.size());
  for (const auto& config : configs) {
    CandidateResult r;
    r.config = config;
    try {
      std::function<void()> launch = prepare(config);
      if (!launch) throw std::runtime_error("prepare returned no launcher");
      r.m = measure(timer, launch, opts);
      r.ok = true;
    } catch (const std::exception& e) {
      r.ok = false;
      r.m = Measurement{};
      r.error = e.what();
    } catch (...) {
      r.ok = false;
      r.m = Measurement{};
      r.error = "unknown exception (not a std::exception)";
    }
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace ktune::autotune
