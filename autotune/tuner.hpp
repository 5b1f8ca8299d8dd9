// Tuning one key on the current GPU: every candidate of the family's search space (the default first) is
// compiled in parallel, then measured on a rotating-input workload; the winner is the first candidate within
// noise of the fastest (deterministic), and the whole candidate table is persisted with the device
// fingerprint, so another process — or another H200 — reuses it and a different GPU or driver does not.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "autotune/measure.hpp"
#include "autotune/select.hpp"
#include "ktune/export.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"

namespace ktune::cache {
struct TuningRecord;
}

namespace ktune::autotune {

struct TuneOptions {
  MeasureOptions measure;
  double noise_fraction = 0.02;  // candidates within 2% of the best count as ties; the earliest wins
  int compile_jobs = 0;          // 0 = hardware threads
  bool persist = true;           // write the tuning row into the writable cache layer
  bool host = false;             // tune on the host CPU (Arch "host", LLVM backend: autotune/host_tuner.hpp)
                                 // instead of the current CUDA context's GPU
  // Recorded in the row's metadata (device_index) for the report: which GPU ordinal, or which host worker,
  // measured it. -1: not recorded (one process tuning on its current device).
  int device_index = -1;
  // Called after measuring and before the row is stored (when persist). The warmup worker's test hook stops
  // there, so a test can kill a worker that has measured a key but stored nothing.
  std::function<void()> before_store;
};

struct TuneOutcome {
  std::string family, problem_key, tuning_key, device_fingerprint;
  std::string winner;
  std::vector<CandidateResult> candidates;  // default first, then the search space
  int compiled = 0;                         // candidates that had to be compiled (not in any cache layer)
  double compile_ms = 0, measure_ms = 0;
};

// buckets: short dim name -> bucket value (b, l, m). Needs a current CUDA context (unless options.host).
KTUNE_API TuneOutcome tune(Runtime& rt, const std::string& family, const std::string& problem_key,
                           const std::vector<std::pair<std::string, int64_t>>& buckets, const TuneOptions& options);

// The winner this ktune version already stored for `tuning_key` on the current device (host: the host CPU), or ""
// when none is stored, when only another version's row is, when `retune` asks to measure it again, or when a
// GPU row's candidates were compiled by another NVRTC than this process compiles with (the runtime still uses
// such a winner; warmup, which compiles the new binaries anyway, measures them). The one "already tuned?"
// question of warmup, in process and in its worker processes.
KTUNE_API std::string winner_in_cache(Runtime& rt, const std::string& family, const std::string& tuning_key,
                                      bool host, bool retune);

// warmup's "tune this key?" step, in process and in its worker processes, where several processes may warm one
// cache at once: takes the key's tuning flight (internal::tuning_flight: while another process tunes the key,
// waits up to wait_s seconds for it), then asks winner_in_cache, reading the cache afresh. A claim
// with a winner means "done earlier"; one without holds the flight until it is destroyed, so the caller tunes
// and stores the key, then lets it go. The wait ends early only by timing out (`note` then says so).
struct KeyClaim {
  std::string winner;      // already tuned (by this or another process): tune nothing
  bool waited = false;     // another process held the key's flight first
  std::string note;        // the wait timed out: the key may be tuned twice
  std::shared_ptr<void> flight;
};
KTUNE_API KeyClaim claim_key(Runtime& rt, const std::string& family, const std::string& tuning_key, bool host,
                             bool retune, double wait_s);
// How long claim_key waits for another process tuning the same key: a tuning that takes longer is stuck.
inline constexpr double kTuningFlightWait_s = 600;

// Whether a row whose candidates `row_compiler` compiled is to be tuned again by a process compiling with
// `current`: both known ("" = not recorded / no compiler here) and different.
KTUNE_API bool tuned_by_another_compiler(const std::string& row_compiler, const std::string& current);
// Whether a stored GPU tuning row counts as done for this process: not measured on the binaries of another NVRTC
// than the one it compiles with (host rows always count: their fingerprint names the LLVM version).
KTUNE_API bool gpu_row_stands(const cache::TuningRecord& row);

// Tunings performed in this process (replay asserts 0).
KTUNE_API int64_t tunings_performed();

// A problem's tuning candidates on `arch` within `limits`: the default config first (ties go to it), then the rest
// of the family's search space in its order, each once.
KTUNE_API std::vector<std::string> candidate_configs(const FamilyInfo& family, const std::string& problem_key,
                                                     const Arch& arch, const DeviceLimits& limits);

// Compiles (family, problem, config, arch) jobs on `jobs` threads; returns per-job error ("" = ok) and whether
// each compiled (vs found in the cache).
struct CompileJob {
  std::string family, problem_key, config;
  Arch arch;
};
struct CompileJobResult {
  bool compiled = false;
  std::string error;
  double compile_ms = 0;
  std::string not_stored;  // compiled, but not stored in the cache: why (EnsureResult::not_stored)
};
KTUNE_API std::vector<CompileJobResult> compile_all(Runtime& rt, const std::vector<CompileJob>& jobs, int threads,
                                                    const std::function<void(size_t done, size_t total)>& progress = {});

}  // namespace ktune::autotune
