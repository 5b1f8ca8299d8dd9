#include "autotune/warmup_workers.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "autotune/tuner.hpp"
#include "autotune/worker_process.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune_internal/tuning_store.hpp"

namespace ktune::autotune {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// GPU workers first, by the ordinals given, then the host workers 0..N-1.
std::vector<PoolWorker> pool_workers(const WarmupOptions& opt) {
  std::vector<PoolWorker> workers;
  for (int d : opt.devices) workers.push_back({false, d});
  for (int i = 0; i < opt.host_workers; ++i) workers.push_back({true, i});
  return workers;
}

}  // namespace

std::set<std::string> worker_arches(const WarmupOptions& opt) {
  std::set<std::string> arches;
  if (opt.host_workers < 0)
    throw Error(Status::invalid_argument, "warmup",
                fmt::format("host_workers: expected 0 (none) or a count of workers, got {}", opt.host_workers));
  if (opt.host_workers > 0) arches.insert("host");
  if (opt.devices.empty()) return arches;
  const std::vector<DeviceInfo> gpus = system_info().devices;
  std::set<int> seen;
  for (int d : opt.devices) {
    if (d < 0 || d >= static_cast<int>(gpus.size()))
      throw Error(Status::invalid_argument, "warmup",
                  fmt::format("devices: expected GPU ordinals below {} (the GPUs of this machine), got {}",
                              gpus.size(), d));
    if (!seen.insert(d).second)
      throw Error(Status::invalid_argument, "warmup", fmt::format("devices: expected each GPU once, got {} twice", d));
    arches.insert(gpus[static_cast<size_t>(d)].arch);
  }
  return arches;
}

double flight_wait_s(const WarmupOptions& opt, Clock::time_point wall0) {
  double wait = kTuningFlightWait_s;
  if (opt.budget_s > 0) wait = std::clamp(opt.budget_s - ms_since(wall0) / 1000, 0.0, wait);
  if (opt.key_timeout_s > 0) wait = std::min(wait, opt.key_timeout_s / 2);
  return wait;
}

void tune_in_workers(Runtime& rt, const WarmupOptions& opt, const std::vector<PoolTask>& tasks,
                     const std::vector<WarmupItem>& items, Clock::time_point wall0, WarmupReport& report) {
  // The workers open the same cache search path and store into its writable layer: with none here (a read-only
  // runtime), their rows would go where this runtime was told not to write, or nowhere.
  std::string why;
  if (rt.writable_cache_layer(&why).empty())
    throw Error(Status::cache_error, "warmup",
                fmt::format("worker processes store every row they tune, and this runtime has no writable cache "
                            "layer: {}",
                            why));
  PoolOptions po;
  po.executable = opt.worker_executable.empty() ? default_worker_executable() : opt.worker_executable;
  po.cache_path = rt.options().cache_path;
  po.workers = pool_workers(opt);
  po.out_of_budget = [&] { return opt.budget_s > 0 && ms_since(wall0) > opt.budget_s * 1000; };
  po.progress = opt.progress;
  po.key_timeout_s = opt.key_timeout_s;
  po.flight_wait_s = [&] { return flight_wait_s(opt, wall0); };
  PoolReport pr = run_worker_pool(po, tasks);
  report.workers = static_cast<int>(po.workers.size());
  report.workers_lost = pr.workers_lost;
  report.retaken = pr.retaken;
  report.worker_problems = pr.problems;
  report.budget_exhausted = report.budget_exhausted || pr.budget_exhausted;
  for (const PoolOutcome& o : pr.outcomes) {
    WarmupItem w = items[o.task];
    w.status = o.status;
    w.winner = o.winner;
    // A key the budget left unqueued may have been tuned before (this run's workers check that only for the keys
    // they take): reported as done earlier, as the in-process path does, not as work the budget cut.
    if (o.status == "skipped: budget exhausted" && !opt.retune && !o.fingerprint.empty()) {
      try {
        // As a worker would judge it: a GPU row measured on another NVRTC's binaries is tuned again.
        auto row = internal::tuning_row(rt, w.family, w.tuning_key, o.fingerprint);
        if (row && (w.arch == "host" || gpu_row_stands(*row))) {
          w.status = "done earlier";
          w.winner = row->winner_config;
        }
      } catch (const std::exception&) {  // unreadable: stays reported as skipped
      }
    }
    w.ms = o.ms;
    w.device = o.device;
    if (w.status == "tuned") {
      report.tuned++;
      report.tune_ms += o.ms;
    } else if (w.status == "done earlier") {
      report.already_done++;
    } else if (w.status.rfind("skipped", 0) == 0) {
      report.skipped++;
    } else {
      report.failed++;
    }
    report.items.push_back(std::move(w));
  }
}

}  // namespace ktune::autotune
