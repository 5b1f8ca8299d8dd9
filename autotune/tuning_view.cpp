#include "autotune/tuning_view.hpp"

#include <exception>

#include "autotune/tuning_record.hpp"

namespace ktune::autotune {

TuningView read_tuning_entry(const CacheTuningEntry& entry) {
  TuningView v;
  v.entry = entry;
  cache::TuningRecord r;
  r.family = entry.family;
  r.problem_key = entry.problem_key;
  r.device_fingerprint = entry.device_fingerprint;
  r.ktune_version = entry.ktune_version;
  r.winner_config = entry.winner_config;
  r.candidates_json = entry.candidates_json;
  r.tuned_at = entry.tuned_at;
  try {
    TuningResult t = from_tuning_record(r);
    v.candidates = std::move(t.candidates);
    v.winner = t.winner;
    v.noise_fraction = t.noise_fraction;
    v.bytes_per_call = t.bytes_per_call;
    v.flops_per_call = t.flops_per_call;
    v.ceilings = t.ceilings;
    v.device_index = t.device_index;
    v.compiler_version = t.compiler_version;
    v.readable = true;
  } catch (const std::exception& e) {
    v.error = e.what();
  }
  return v;
}

}  // namespace ktune::autotune
