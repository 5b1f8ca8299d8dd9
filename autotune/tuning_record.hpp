// A tuning result as a row of the cache's tuning table, and back.
//
// The row keeps every candidate's timing, not just the winner, so `ktune cache show` can explain a choice and a
// later run can be compared with it. candidates_json (format "ktune.tuning.v1"):
//   {"format": "ktune.tuning.v1", "family": ..., "problem_key": ..., "device_fingerprint": ...,
//    "ktune_version": "0.2.0", "tuned_at": <unix s>, "noise_fraction": 0.03, "winner": "<config>",
//    "candidates": [{"config": ..., "ok": true, "median_ms": ..., "spread": ..., "rounds": 1, "stable": true,
//                    "samples_ms": [...]},
//                   {"config": ..., "ok": false, "error": "..."}, ...],
//    "workload": {"bytes_per_call": ..., "flops_per_call": ...},                        (optional)
//    "device_ceilings": {"peak_bytes_per_s": ..., "peak_flops": ..., "source": "..."},  (optional)
//    "device_index": 1,                                                                  (optional)
//    "compiler_version": "13.0.88"}                                                      (optional)
// The two optional objects (written when known; rows of older builds lack them and stay readable) place the
// winner on a roofline: what one call moves and computes, and the device's peaks when it was tuned.
// device_index (written by a multi-device warmup's workers) says which GPU ordinal, or which host worker,
// measured the row; it is for the report only: the row applies to every device of its fingerprint.
// compiler_version (GPU rows) is the NVRTC that compiled the measured candidates. A winner stays a valid config
// under another NVRTC, so the runtime still uses it, but `ktune warmup` measures the key again where it compiles
// with a different one (winner_in_cache, autotune/tuner.hpp). Host rows leave it out: their fingerprint already
// names the LLVM version.
// family, problem_key, device_fingerprint, ktune_version and winner repeat the row's columns; reading checks
// they agree, so a row edited in one place only is reported rather than trusted.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "autotune/buckets.hpp"
#include "autotune/select.hpp"
#include "ktune/cache/store.hpp"
#include "ktune/device.hpp"
#include "ktune/export.hpp"

namespace ktune::autotune {

struct TuningResult {
  std::string family;              // "xqa_decode"
  std::string problem_key;         // the tuning key, from tuning_problem_key()
  std::string device_fingerprint;  // DeviceInfo::fingerprint
  std::string ktune_version;       // empty: this build's version
  std::vector<CandidateResult> candidates;  // search-space order
  size_t winner = 0;                        // index into candidates (select_winner)
  double noise_fraction = 0;                // the one the winner was selected with
  int64_t tuned_at = 0;                     // unix seconds; 0: now
  // Workload::bytes_per_call / flops_per_call of the tuned key; 0 = not recorded.
  double bytes_per_call = 0, flops_per_call = 0;
  // The device's roofline ceilings when it was tuned (0 = unknown).
  DeviceCeilings ceilings;
  int device_index = -1;  // the GPU ordinal or host worker that measured it; -1 = not recorded
  std::string compiler_version;  // the NVRTC version the candidates were compiled with; "" = not recorded
};

// "<problem key>|<buckets>", buckets sorted by their short names so callers cannot fragment keys by order:
// batch -> b, seq_len -> l, tokens -> m, any other dim by its own name. E.g. "d128.h32.kv8.p32|b64.l4096".
// No buckets: the problem key alone. Throws Error(invalid_argument) for an empty key, a key containing '|', a
// dim that is empty, repeated or not [a-z_], or a value < 1.
KTUNE_API std::string tuning_problem_key(const std::string& problem_key, const std::vector<BucketValue>& buckets);

// Throws Error(invalid_argument, "autotune") when the result is inconsistent: empty family, key or fingerprint,
// no candidates, winner out of range or not ok, repeated configs.
KTUNE_API cache::TuningRecord to_tuning_record(const TuningResult& result);

// Throws Error(cache_error, "autotune", "tuning row <family>/<key>: <field>: expected ..., got ...") for a row
// that is not one this code wrote (damaged or hand-edited); callers treat that as a miss and re-tune.
KTUNE_API TuningResult from_tuning_record(const cache::TuningRecord& record);

// The ktune version stored in new rows ("0.2.0").
KTUNE_API const char* tuning_ktune_version();

}  // namespace ktune::autotune
