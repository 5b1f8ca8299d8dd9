#include "autotune/host_tuner.hpp"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "autotune/host_timer.hpp"
#include "autotune/host_workload.hpp"
#include "autotune/sweep.hpp"
#include "autotune/tune_steps.hpp"
#include "autotune/warmup.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"

namespace ktune::autotune {
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

Arch host_arch() { return Arch::host_cpu(); }

}  // namespace

DeviceCeilings host_ceilings() {
  // Measured once per process: every hardware thread sums its slice of a 128 MiB buffer (larger than any
  // last-level cache), best of 4 passes. No FLOP ceiling: the peak of the host's vector units is not measured.
  static const DeviceCeilings ceilings = [] {
    const size_t n = (size_t{128} << 20) / sizeof(uint64_t);
    std::vector<uint64_t> buf(n);
    for (size_t i = 0; i < n; ++i) buf[i] = i * 0x9E3779B97F4A7C15ull;
    const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
    std::vector<uint64_t> sums(threads);
    double best_s = 0;
    for (int pass = 0; pass < 4; ++pass) {
      auto t0 = Clock::now();
      std::vector<std::thread> pool;
      for (unsigned t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          const size_t lo = n * t / threads, hi = n * (t + 1) / threads;
          uint64_t a = 0, b = 0, c = 0, d = 0;
          size_t i = lo;
          for (; i + 4 <= hi; i += 4) a += buf[i], b += buf[i + 1], c += buf[i + 2], d += buf[i + 3];
          for (; i < hi; ++i) a += buf[i];
          sums[t] += a ^ b ^ c ^ d;
        });
      for (auto& th : pool) th.join();
      const double s = std::chrono::duration<double>(Clock::now() - t0).count();
      if (pass == 0 || s < best_s) best_s = s;
    }
    volatile uint64_t sink = 0;
    for (uint64_t v : sums) sink = sink + v;
    DeviceCeilings c;
    c.peak_bytes_per_s = best_s > 0 ? double(n * sizeof(uint64_t)) / best_s : 0;
    c.source = fmt::format("measured: {} threads reading 128 MiB, best of 4 passes; FLOP/s not measured", threads);
    return c;
  }();
  return ceilings;
}

MeasureOptions host_measure_options() {
  MeasureOptions m;
  m.warmup_iters = 1;
  m.samples = 5;
  m.iters_per_sample = 1;
  m.max_spread = 0.05;
  m.max_rounds = 2;
  return m;
}


TuneOutcome tune_on_host(Runtime& rt, const std::string& family_name, const std::string& problem_key,
                         const std::vector<std::pair<std::string, int64_t>>& buckets, const TuneOptions& options) {
  const FamilyInfo& fam = family(family_name);
  const Arch arch = host_arch();
  TuneOutcome out = tune_steps::begin(fam, problem_key, buckets);
  out.device_fingerprint = rt.host_fingerprint();
  const std::vector<std::string> configs = candidate_configs(fam, out.problem_key, arch, DeviceLimits{});
  const std::vector<CompileJobResult> compiled = tune_steps::compile(rt, out, configs, {}, arch, options.compile_jobs);

  auto workload = host_workload_factory(family_name)(rt, out.problem_key, buckets);
  HostTimer timer;
  const auto t0 = Clock::now();
  PrepareFn prepare = [&](const std::string& config) -> std::function<void()> {
    auto it = std::find(configs.begin(), configs.end(), config);
    const CompileJobResult& cr = compiled[static_cast<size_t>(it - configs.begin())];
    if (!cr.error.empty()) throw Error(Status::compile_error, "autotune", cr.error);
    workload->prepare(config);
    return [&workload, config] { workload->launch(config, nullptr); };
  };
  out.candidates = sweep(timer, configs, prepare, options.measure);
  out.measure_ms = ms_since(t0);
  const size_t winner = select_winner(out.candidates, options.noise_fraction);
  out.winner = out.candidates[winner].config;
  tune_steps::persist(rt, out, winner, *workload, host_ceilings(), "", options, "host tuning result");
  rt.remember_host_tuned_config(family_name, out.tuning_key, out.winner);
  return out;
}

}  // namespace ktune::autotune
