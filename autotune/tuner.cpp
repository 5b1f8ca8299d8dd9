#include "autotune/tuner.hpp"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <chrono>
#include <mutex>
#include <optional>
#include <thread>

#include <fmt/format.h>

#include "autotune/gpu_timer.hpp"
#include "autotune/host_tuner.hpp"
#include "autotune/tune_steps.hpp"
#include "autotune/tuning_record.hpp"
#include "autotune/workload.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/launch.hpp"
#include "ktune/tuning.hpp"
#include "ktune_internal/gpu.hpp"
#include "ktune_internal/log.hpp"
#include "ktune_internal/tuning_store.hpp"

namespace ktune::autotune {
using namespace detail;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<int64_t> g_tunings{0};

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

DeviceLimits current_device_limits() { return device_limits(internal::current_device_ordinal()); }

DeviceCeilings current_device_ceilings() { return device_ceilings(internal::current_device_ordinal()); }

// Measures every candidate in interleaved passes (one sample of each candidate per pass) rather than one
// candidate after another: slow drift of the GPU's clocks or temperature during a tuning then shifts every
// candidate alike instead of penalizing whichever came last (sequential sweeps showed such a bias: a consistent
// wrong pick on one key, docs/architecture.md). Candidates whose spread stays above
// max_spread get further passes, up to max_rounds * samples samples.
//
// Post-compile pruning: a candidate other than the default whose entry points use more than kMaxLocalBytes of
// local memory per thread (an array demoted to local memory, heavy spilling) is recorded as pruned, not timed;
// the default always stays in so a winner exists. Smaller spills are timed like any candidate: some of the
// fastest mxfp4_gemm configs spill a little outside their hot loop, and pruning them stored slower winners.
constexpr int64_t kMaxLocalBytes = 512;
std::string spill_reason(Runtime& rt, const FamilyInfo& fam, const std::string& problem, const std::string& config,
                         const Arch& arch) {
  const LoadedKernel& k = rt.get(fmt::format("autotune/{}/{}/{}", fam.name, problem, config),
                                 [&] { return fam.generate(problem, config, arch); });
  for (size_t e = 0; e < k.functions.size(); ++e) {
    KernelResources r = kernel_resources(k, static_cast<int>(e));
    if (r.local_bytes > kMaxLocalBytes)
      return fmt::format("pruned: entry {} uses {} bytes of local memory per thread ({} registers; limit {})", e,
                         r.local_bytes, r.registers, kMaxLocalBytes);
  }
  return "";
}

std::vector<CandidateResult> measure_interleaved(Timer& timer, const std::vector<std::string>& configs,
                                                 const std::vector<CompileJobResult>& compiled, Workload& workload,
                                                 void* stream, const MeasureOptions& opts,
                                                 const std::function<std::string(size_t)>& prune) {
  validate_measure_options(opts);
  std::vector<CandidateResult> results(configs.size());
  std::vector<std::function<void()>> launches(configs.size());
  std::vector<std::vector<double>> samples(configs.size());
  for (size_t i = 0; i < configs.size(); ++i) {
    results[i].config = configs[i];
    try {
      if (!compiled[i].error.empty()) throw Error(Status::compile_error, "autotune", compiled[i].error);
      if (std::string why = prune(i); !why.empty()) throw Error(Status::unsupported, "autotune", why);
      workload.prepare(configs[i]);
      std::string config = configs[i];
      launches[i] = [&workload, config, stream] { workload.launch(config, stream); };
      if (opts.warmup_iters > 0) timer.time_ms(launches[i], opts.warmup_iters);
      results[i].ok = true;
    } catch (const std::exception& e) {
      results[i].error = e.what();
    }
  }
  auto sample = [&](size_t i) {
    try {
      double ms = timer.time_ms(launches[i], opts.iters_per_sample);
      if (!(ms >= 0) || !std::isfinite(ms)) throw Error(Status::internal, "autotune", "timer returned a bad time");
      samples[i].push_back(ms);
    } catch (const std::exception& e) {
      results[i].ok = false;
      results[i].error = e.what();
    }
  };
  for (int pass = 0; pass < opts.samples; ++pass)
    for (size_t i = 0; i < configs.size(); ++i)
      if (results[i].ok) sample(i);
  for (int round = 1; round < opts.max_rounds; ++round) {
    bool any = false;
    for (size_t i = 0; i < configs.size(); ++i)
      if (results[i].ok && median_spread(samples[i]) > opts.max_spread) any = true;
    if (!any) break;
    for (int pass = 0; pass < opts.samples; ++pass)
      for (size_t i = 0; i < configs.size(); ++i)
        if (results[i].ok && median_spread(samples[i]) > opts.max_spread) sample(i);
  }
  for (size_t i = 0; i < configs.size(); ++i) {
    if (!results[i].ok) continue;
    Measurement& m = results[i].m;
    m.samples_ms = samples[i];
    m.median_ms = median_of(samples[i]);
    m.spread = median_spread(samples[i]);
    m.rounds = static_cast<int>((samples[i].size() + opts.samples - 1) / opts.samples);
    m.stable = m.spread <= opts.max_spread;
  }
  return results;
}

}  // namespace

int64_t tunings_performed() { return g_tunings.load(); }

bool tuned_by_another_compiler(const std::string& row_compiler, const std::string& current) {
  return !row_compiler.empty() && !current.empty() && row_compiler != current;
}

std::string winner_in_cache(Runtime& rt, const std::string& family, const std::string& tuning_key, bool host,
                            bool retune) {
  if (retune) return {};
  if (host) return rt.host_tuned_config(family, tuning_key);  // the host fingerprint names the LLVM version
  const std::string winner = rt.tuned_config(family, tuning_key);
  const std::string current = nvrtc_version_or_empty();
  if (winner.empty() || current.empty()) return winner;
  std::string measured_with;
  try {
    const std::optional<cache::TuningRecord> row =
        internal::tuning_row(rt, family, tuning_key, rt.device_fingerprint());
    if (!row || gpu_row_stands(*row)) return winner;
    measured_with = from_tuning_record(*row).compiler_version;
  } catch (const std::exception&) {
    // A read that fails or a row the tuner did not write (`ktune report` names why): the winner the runtime
    // uses stands, as it did before rows recorded their compiler.
    return winner;
  }
  log(LogLevel::info, "{} {}: tuned on binaries of NVRTC {}, this process compiles with NVRTC {}; tuning it again",
      family, tuning_key, measured_with, current);
  return {};
}

bool gpu_row_stands(const cache::TuningRecord& row) {
  return !tuned_by_another_compiler(from_tuning_record(row).compiler_version, nvrtc_version_or_empty());
}

KeyClaim claim_key(Runtime& rt, const std::string& family, const std::string& tuning_key, bool host, bool retune,
                   double wait_s) {
  const std::string fingerprint = host ? rt.host_fingerprint() : rt.device_fingerprint();
  internal::TuningFlight flight = internal::tuning_flight(rt, family, tuning_key, fingerprint, wait_s);
  KeyClaim claim;
  claim.waited = flight.waited;
  claim.note = std::move(flight.note);
  // This process may have looked the key up before another one stored it (a miss is remembered), whether or not
  // that one still held the key when we asked: the cache is read again.
  internal::forget_tuned_config(rt, family, tuning_key, fingerprint);
  claim.winner = winner_in_cache(rt, family, tuning_key, host, retune);
  if (claim.winner.empty()) claim.flight = std::move(flight.lock);
  return claim;
}

std::vector<CompileJobResult> compile_all(Runtime& rt, const std::vector<CompileJob>& jobs, int threads,
                                          const std::function<void(size_t, size_t)>& progress) {
  std::vector<CompileJobResult> results(jobs.size());
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::atomic<size_t> next{0}, done{0};
  std::mutex progress_mutex;
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      const CompileJob& j = jobs[i];
      try {
        const FamilyInfo& fam = family(j.family);
        EnsureResult r = rt.ensure_binary(fam.generate(j.problem_key, j.config, j.arch), j.arch);
        results[i].compiled = r.compiled;
        results[i].compile_ms = r.compile_ms;
        results[i].not_stored = std::move(r.not_stored);
      } catch (const std::exception& e) {
        results[i].error = e.what();
      }
      size_t d = ++done;
      if (progress) {
        std::lock_guard<std::mutex> lock(progress_mutex);
        progress(d, jobs.size());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::min<int>(threads, static_cast<int>(jobs.size())); ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  return results;
}

std::vector<std::string> candidate_configs(const FamilyInfo& fam, const std::string& problem_key, const Arch& arch,
                                           const DeviceLimits& limits) {
  std::vector<std::string> configs = {fam.default_config(problem_key, arch)};
  for (auto& c : fam.search_space(problem_key, arch, limits))
    if (std::find(configs.begin(), configs.end(), c) == configs.end()) configs.push_back(std::move(c));
  return configs;
}

namespace tune_steps {

TuneOutcome begin(const FamilyInfo& family, const std::string& problem_key,
                  const std::vector<std::pair<std::string, int64_t>>& buckets) {
  TuneOutcome out;
  out.family = family.name;
  out.problem_key = family.canonical_problem(problem_key);
  out.tuning_key = tuning_key(out.problem_key, buckets);
  return out;
}

std::vector<CompileJobResult> compile(Runtime& rt, TuneOutcome& out, const std::vector<std::string>& configs,
                                      const std::vector<std::string>& after, const Arch& arch, int jobs) {
  const auto t0 = Clock::now();
  std::vector<CompileJob> list;
  for (const auto& c : configs) list.push_back({out.family, out.problem_key, c, arch});
  for (const auto& c : after) list.push_back({out.family, out.problem_key, c, arch});
  std::vector<CompileJobResult> compiled = compile_all(rt, list, jobs);
  out.compile_ms = ms_since(t0);
  for (const auto& r : compiled) out.compiled += r.compiled ? 1 : 0;
  return compiled;
}

void persist(Runtime& rt, const TuneOutcome& out, size_t winner, const Workload& workload,
             const DeviceCeilings& ceilings, const std::string& compiler_version, const TuneOptions& options,
             const char* what) {
  if (!options.persist) return;
  TuningResult tr;
  tr.family = out.family;
  tr.problem_key = out.tuning_key;
  tr.device_fingerprint = out.device_fingerprint;
  tr.candidates = out.candidates;
  tr.winner = winner;
  tr.noise_fraction = options.noise_fraction;
  tr.bytes_per_call = workload.bytes_per_call();  // roofline position in `ktune report`
  tr.flops_per_call = workload.flops_per_call();
  tr.ceilings = ceilings;
  tr.device_index = options.device_index;
  tr.compiler_version = compiler_version;
  cache::TuningRecord rec = to_tuning_record(tr);
  if (options.before_store) options.before_store();
  if (!internal::store_tuning_row(rt, rec))
    log(LogLevel::warn, "no writable cache layer: the {} for {} is kept in memory only", what, out.tuning_key);
}

}  // namespace tune_steps

TuneOutcome tune(Runtime& rt, const std::string& family_name, const std::string& problem_key,
                 const std::vector<std::pair<std::string, int64_t>>& buckets, const TuneOptions& options) {
  if (options.host) {  // the host CPU through the LLVM backend (autotune/host_tuner.cpp)
    TuneOutcome o = tune_on_host(rt, family_name, problem_key, buckets, options);
    g_tunings++;
    return o;
  }
  const FamilyInfo& fam = family(family_name);
  TuneOutcome out = tune_steps::begin(fam, problem_key, buckets);
  out.device_fingerprint = rt.device_fingerprint();
  const Arch arch = rt.current_arch();
  const std::vector<std::string> configs = candidate_configs(fam, out.problem_key, arch, current_device_limits());
  // A split candidate whose shared module failed fails its own launches.
  const std::vector<CompileJobResult> compiled =
      tune_steps::compile(rt, out, configs, shared_module_configs(fam, out.problem_key, arch), arch, options.compile_jobs);

  auto workload = workload_factory(family_name)(rt, out.problem_key, buckets);
  internal::Stream stream;
  GpuTimer timer(stream.get());
  const auto t0 = Clock::now();
  auto prune = [&](size_t i) {
    return i == 0 ? std::string() : spill_reason(rt, fam, out.problem_key, configs[i], arch);
  };
  out.candidates = measure_interleaved(timer, configs, compiled, *workload, stream.get(), options.measure, prune);
  // A launch failure can leave the stream unusable: make sure everything finished before reporting.
  stream.synchronize("cuStreamSynchronize after tuning");
  out.measure_ms = ms_since(t0);
  const size_t winner = select_winner(out.candidates, options.noise_fraction);
  out.winner = out.candidates[winner].config;
  g_tunings++;
  // The compiler of every candidate is recorded, so a row whose binaries another NVRTC built is tuned again.
  tune_steps::persist(rt, out, winner, *workload, current_device_ceilings(), nvrtc_version_or_empty(), options,
                      "tuning result");
  rt.remember_tuned_config(family_name, out.tuning_key, out.winner);
  return out;
}

}  // namespace ktune::autotune
