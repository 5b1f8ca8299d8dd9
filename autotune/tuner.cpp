#include "autotune/tuner.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "autotune/gpu_timer.hpp"
#include "autotune/host_tuner.hpp"
#include "autotune/sweep.hpp"
#include "autotune/tuning_record.hpp"
#include "autotune/workload.hpp"
#include "driver_api.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/tuning.hpp"
#include "log.hpp"
#include "runtime_impl.hpp"

namespace ktune::autotune {
using namespace detail;
using Clock = std::chrono::steady_clock;

namespace {

std::atomic<int64_t> g_tunings{0};

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

DeviceLimits current_device_limits() {
  const DriverApi& cu = driver();
  CUdevice dev = 0;
  check_cu(cu.cuCtxGetDevice(&dev), "cuCtxGetDevice");
  return device_limits(static_cast<int>(dev));
}

}  // namespace

int64_t tunings_performed() { return g_tunings.load(); }

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

TuneOutcome tune(Runtime& rt, const std::string& family_name, const std::string& problem_key,
                 const std::vector<std::pair<std::string, int64_t>>& buckets, const TuneOptions& options) {
  if (options.host) {  // the host CPU through the LLVM backend (autotune/host_tuner.cpp)
    TuneOutcome o = tune_on_host(rt, family_name, problem_key, buckets, options);
    g_tunings++;
    return o;
  }
  const FamilyInfo& fam = family(family_name);
  TuneOutcome out;
  out.family = family_name;
  out.problem_key = fam.canonical_problem(problem_key);
  out.tuning_key = tuning_key(out.problem_key, buckets);
  out.device_fingerprint = rt.device_fingerprint();
  Arch arch = rt.current_arch();

  // Candidates: the default config first (ties go to it), then the rest of the search space in spec order.
  std::vector<std::string> configs = {fam.default_config(out.problem_key, arch)};
  for (const auto& c : fam.search_space(out.problem_key, arch, current_device_limits()))
    if (std::find(configs.begin(), configs.end(), c) == configs.end()) configs.push_back(c);

  auto t0 = Clock::now();
  std::vector<CompileJob> jobs;
  for (const auto& c : configs) jobs.push_back({family_name, out.problem_key, c, arch});
  std::vector<CompileJobResult> compiled = compile_all(rt, jobs, options.compile_jobs);
  out.compile_ms = ms_since(t0);
  for (const auto& r : compiled) out.compiled += r.compiled ? 1 : 0;

  auto workload = workload_factory(family_name)(rt, out.problem_key, buckets);

  const DriverApi& cu = driver();
  CUstream stream = nullptr;
  check_cu(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  struct StreamGuard {
    CUstream s;
    ~StreamGuard() {
      if (const DriverApi* d = try_driver()) d->cuStreamDestroy(s);
    }
  } guard{stream};
  GpuTimer timer(stream);

  t0 = Clock::now();
  PrepareFn prepare = [&](const std::string& config) -> std::function<void()> {
    auto it = std::find(configs.begin(), configs.end(), config);
    const CompileJobResult& cr = compiled[static_cast<size_t>(it - configs.begin())];
    if (!cr.error.empty()) throw Error(Status::compile_error, "autotune", cr.error);
    workload->prepare(config);
    return [&workload, config, stream] { workload->launch(config, stream); };
  };
  out.candidates = sweep(timer, configs, prepare, options.measure);
  // A launch failure can leave the stream unusable: make sure everything finished before reporting.
  check_cu(cu.cuStreamSynchronize(stream), "cuStreamSynchronize after tuning");
  out.measure_ms = ms_since(t0);
  size_t winner = select_winner(out.candidates, options.noise_fraction);
  out.winner = out.candidates[winner].config;
  g_tunings++;

  if (options.persist) {
    TuningResult tr;
    tr.family = family_name;
    tr.problem_key = out.tuning_key;
    tr.device_fingerprint = out.device_fingerprint;
    tr.candidates = out.candidates;
    tr.winner = winner;
    tr.noise_fraction = options.noise_fraction;
    cache::TuningRecord rec = to_tuning_record(tr);
    if (rt.impl().cache->writable_layer()) {
      rt.impl().cache->put_tuning(rec);
    } else {
      log(LogLevel::warn, "no writable cache layer: the tuning result for {} is kept in memory only", out.tuning_key);
    }
  }
  rt.remember_tuned_config(family_name, out.tuning_key, out.winner);
  return out;
}

}  // namespace ktune::autotune
