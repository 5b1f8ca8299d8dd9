// Warmup: everything a preset needs, ahead of serving. On the GPU of the current context it compiles every
// candidate and tunes every (op, bucket) key, skipping keys already tuned for this device (resumable); with
// WarmupOptions::devices or host_workers the keys are tuned by worker processes instead, one per GPU (or N on
// the host), dealt out by autotune/worker_pool.hpp after every compile is done here; for
// other arches (or without a GPU) it compiles the default config and every candidate of each distinct
// problem so the binaries ship even where tuning happens later. Replay runs every bucket once from the cache,
// as a serving process would, and reports compiles, tunings and first-call vs steady-state time.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "autotune/presets.hpp"
#include "autotune/tuner.hpp"
#include "ktune/export.hpp"
#include "ktune/runtime.hpp"

namespace ktune::autotune {

struct WarmupOptions {
  std::vector<std::string> arches;  // empty: the current device's arch; without a GPU every default arch (+ host when the LLVM plugin loads)
  bool tune = true;                 // tune on the current device (for its arch)
  bool all_candidates = true;       // compile every candidate config, not only the default (always for the
                                    // arches of devices / host_workers, whose tunings need them)
  double budget_s = 0;              // stop starting new tuning keys after this many seconds (0: none)
  bool retune = false;              // measure keys that already have this version's row for the device too
  int64_t max_total_tokens = int64_t{1} << 21;  // skip buckets with batch*seq_len above this (KV capacity)
  // Arch "host" (tuned on this CPU through the LLVM backend, with host_measure_options()): keys with
  // batch*seq_len above this are skipped, so a host warmup stays CI-sized (docs/host_backend.md).
  int64_t host_max_total_tokens = 8192;
  // Arch "host", GEMM families (bucket "tokens", e.g. mxfp4_gemm): buckets above this many tokens are skipped.
  // A MoE key at t tokens runs t * top_k rows over up to t * top_k experts' weights per call (gpt-oss-120b:
  // 8 MB of MXFP4 per expert), which a 2-core CI runner tunes in seconds only for small t.
  int64_t host_max_gemm_tokens = 4;
  int jobs = 0;                     // parallel compiles (0: cores)
  // Tuning in worker processes (autotune/worker_pool.hpp) instead of this one; compiles stay here, done once
  // for all workers before any tunes. devices: GPU ordinals, one worker process each (empty arches: theirs).
  // host_workers: that many host CPU workers for the keys of arch "host" (arches must include "host").
  std::vector<int> devices;
  int host_workers = 0;
  std::string worker_executable;    // the ktune CLI the workers run; "": default_worker_executable()
  double key_timeout_s = 0;         // > 0: a worker holding one key longer is killed as hung, the key retaken
  TuneOptions tune_options;
  std::function<void(const std::string& what, size_t done, size_t total)> progress;
};

struct WarmupItem {
  std::string arch, family, tuning_key;
  std::string status;  // "tuned", "done earlier", "compiled", "skipped: ...", "failed: ..."
  std::string winner;
  double ms = 0;
  int device = -1;  // the GPU ordinal or host worker that tuned it; -1: this process (or nobody)
};

struct WarmupReport {
  std::vector<WarmupItem> items;
  int keys = 0, tuned = 0, already_done = 0, skipped = 0, failed = 0;
  int compile_jobs = 0, compiled = 0, cache_hits = 0, compile_failed = 0;
  double compile_wall_ms = 0, tune_ms = 0, wall_ms = 0;
  bool budget_exhausted = false;
  // Worker processes (devices / host_workers): started, lost (died, or failed to start or to exit cleanly),
  // keys retaken after their worker died, and what happened to each lost worker.
  int workers = 0, workers_lost = 0, retaken = 0;
  std::vector<std::string> worker_problems;
};

KTUNE_API WarmupReport warmup(Runtime& rt, const Preset& preset, const WarmupOptions& options);

struct ReplayOp {
  std::string family, tuning_key;
  std::vector<std::string> labels;  // the preset ops this key serves
  std::string config;            // the config the runtime chose for the engine call (its plan)
  std::string source;            // why: "tuned" (this device's row) or "default" (no usable row)
  bool tuned = false;            // source == "tuned"
  double first_call_ms = 0;      // the first call: module load from the cache + launch + completion
  double steady_call_ms = 0;     // median of later calls (launch + completion)
};

struct ReplayReport {
  std::vector<ReplayOp> ops;
  RuntimeStats stats;
  int64_t tunings = 0;
  double load_all_ms = 0;        // loading every op's kernel from the cache before its calls (a server's start)
  int64_t skipped = 0;           // the preset's keys a replay does not run (no workload, or above the caps)
};

// Every op is called through the family's engine entry point with no forced config; the config the runtime
// chose and its source are reported per op. Needs a current CUDA context. Ops run one at a time, each with its
// own device inputs, freed before the next op's are made. preload: load each op's kernel before its first timed
// call (a server loads them at start); otherwise the first call includes the module load. arch
// "host": replays the host keys on the CPU instead (no GPU needed; pass WarmupOptions::host_max_total_tokens
// as max_total_tokens to replay what warmup tuned). (replay.cpp)
KTUNE_API ReplayReport replay(Runtime& rt, const Preset& preset, int64_t max_total_tokens, bool preload,
                              const std::string& arch = "");

// Preset ranges rounded to the power-of-two buckets launches use (ktune/tuning.hpp).
KTUNE_API Preset with_pow2_buckets(Preset preset);

}  // namespace ktune::autotune
