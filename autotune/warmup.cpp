#include "autotune/warmup.hpp"

#include <algorithm>
#include <chrono>
#include <map>
#include <set>

#include <fmt/format.h>

#include "autotune/host_tuner.hpp"
#include "autotune/plan.hpp"
#include "autotune/tuner.hpp"
#include "autotune/warmup_workers.hpp"
#include "autotune/workload.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/tuning.hpp"
#include "ktune_internal/gpu.hpp"
#include "ktune_internal/log.hpp"

namespace ktune::autotune {
using namespace detail;
using Clock = std::chrono::steady_clock;

namespace {

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

bool known_family(const std::string& name) {
  for (const auto& f : families())
    if (f.name == name) return true;
  return false;
}


int64_t total_tokens(const WorkItem& item) {
  int64_t batch = 1, seq = 1;
  for (const auto& b : item.buckets) {
    if (b.dim == "batch") batch = b.value;
    if (b.dim == "seq_len") seq = b.value;
  }
  return batch * seq;
}

// The "tokens" bucket (GEMM rows per step) of an item, 0 when it has none.
int64_t gemm_tokens(const WorkItem& item) {
  for (const auto& b : item.buckets)
    if (b.dim == "tokens") return b.value;
  return 0;
}

// A GPU counts when the calling thread has a current context (the CLI makes device 0's current).
bool gpu_present() { return internal::gpu_context_current(); }

}  // namespace

Preset with_pow2_buckets(Preset p) {
  for (BucketSpec* s : {&p.batch, &p.seq_len}) {
    s->min = static_cast<int>(bucket_pow2_ceil(s->min));
    s->max = static_cast<int>(bucket_pow2_ceil(s->max));
  }
  return p;
}

WarmupReport warmup(Runtime& rt, const Preset& preset_in, const WarmupOptions& opt) {
  auto wall0 = Clock::now();
  WarmupReport report;
  Preset preset = with_pow2_buckets(preset_in);

  bool have_gpu = gpu_present();
  std::string device_arch_name = have_gpu ? rt.current_arch().str() : "";
  const std::set<std::string> pooled_arches = worker_arches(opt);
  std::vector<std::string> arches = opt.arches;
  if (arches.empty() && !opt.devices.empty()) {
    for (const auto& a : pooled_arches)
      if (a != "host") arches.push_back(a);
    if (opt.host_workers > 0) arches.push_back("host");
  }
  if (opt.host_workers > 0 && std::find(arches.begin(), arches.end(), "host") == arches.end())
    throw Error(Status::invalid_argument, "warmup",
                "host_workers: host workers tune the keys of arch host, so the arches must include host");
  for (const auto& a : pooled_arches)
    if (a != "host" && std::find(arches.begin(), arches.end(), a) == arches.end())
      throw Error(Status::invalid_argument, "warmup",
                  fmt::format("devices: a listed GPU is {}, which the arches ({}) leave out: add it, or leave the "
                              "arches empty to get the GPUs' own",
                              a, fmt::join(arches, ",")));
  if (arches.empty()) {
    if (have_gpu) arches.push_back(device_arch_name);
    else {
      // No GPU: ship binaries for every default arch, and tune on the host backend where it is available.
      arches = supported_cuda_arches();
      if (Runtime::host_available()) arches.push_back("host");
    }
  }
  std::vector<WorkItem> plan = make_plan(preset, arches);

  // Phase 1: compile every distinct (family, problem, config, arch) the plan needs, in parallel. Binaries do
  // not depend on buckets, so each problem is compiled once however many buckets it has.
  std::vector<CompileJob> jobs;
  std::set<std::string> seen;
  std::map<std::string, std::string> problem_keys;  // problem_json -> key, per family
  std::map<std::string, std::string> rejected;      // problem_json -> the family's reason, per family
  std::map<std::string, std::string> unbuildable;   // problem_json + arch -> why no config exists for it there
  for (const WorkItem& item : plan) {
    if (!known_family(item.family)) continue;
    const FamilyInfo& fam = family(item.family);
    std::string pk;
    try {
      pk = fam.problem_from_json(item.problem_json);
    } catch (const Error& e) {
      rejected.emplace(item.family + "\n" + item.problem_json, e.what());  // reported once per op below
      continue;
    }
    problem_keys[item.family + "\n" + item.problem_json] = pk;
    Arch arch = Arch::parse(item.arch);
    // The workers' arches get every candidate even with all_candidates off: their tunings need them all, and
    // compiled here they are compiled once, not by each worker process.
    std::vector<std::string> configs;
    try {
      configs = opt.all_candidates || (opt.tune && pooled_arches.count(item.arch))
                    ? candidate_configs(fam, pk, arch, arch_limits(arch))
                    : std::vector<std::string>{fam.default_config(pk, arch)};
      for (auto& c : shared_module_configs(fam, pk, arch)) configs.push_back(std::move(c));
    } catch (const Error& e) {  // e.g. an arch the family has no kernel for: this op fails, the others go on
      unbuildable.emplace(item.family + "\n" + item.problem_json + "\n" + item.arch, e.what());
      continue;
    }
    for (const auto& c : configs) {
      std::string id = fmt::format("{}\n{}\n{}\n{}", item.family, pk, c, item.arch);
      if (seen.insert(id).second) jobs.push_back({item.family, pk, c, arch});
    }
  }
  auto t0 = Clock::now();
  auto results = compile_all(rt, jobs, opt.jobs, [&](size_t done, size_t total) {
    if (opt.progress) opt.progress("compile", done, total);
  });
  report.compile_wall_ms = ms_since(t0);
  report.compile_jobs = static_cast<int>(jobs.size());
  for (size_t i = 0; i < results.size(); ++i) {
    if (!results[i].error.empty()) {
      report.compile_failed++;
      log(LogLevel::warn, "compile failed: {}/{}/{}/{}: {}", jobs[i].family, jobs[i].arch.str(), jobs[i].problem_key,
          jobs[i].config, results[i].error);
    } else if (!results[i].not_stored.empty()) {
      // A warmup's work is what it stores: a binary the cache did not take is compiled again by the next
      // process (or refused under KTUNE_JIT=0), so it counts as a failed compile job, never as done.
      report.compile_failed++;
      log(LogLevel::warn, "compiled but not stored: {}/{}/{}/{}: {}", jobs[i].family, jobs[i].arch.str(),
          jobs[i].problem_key, jobs[i].config, results[i].not_stored);
    } else if (results[i].compiled) {
      report.compiled++;
    } else {
      report.cache_hits++;
    }
  }

  // Phase 2: tune every key of the current device's arch (or hand it to the workers).
  std::vector<PoolTask> pool_tasks;
  std::vector<WarmupItem> pool_items;  // the item each pool task reports into
  size_t done = 0;
  for (const WorkItem& item : plan) {
    WarmupItem w;
    w.arch = item.arch;
    w.family = item.family;
    ++done;
    if (!known_family(item.family)) {
      w.status = "skipped: family not in this build";
      report.skipped++;
      report.items.push_back(w);
      continue;
    }
    auto pk_it = problem_keys.find(item.family + "\n" + item.problem_json);
    if (pk_it == problem_keys.end()) {
      // One failure per rejected op (not per bucket), naming the op and the family's reason.
      auto why = rejected.find(item.family + "\n" + item.problem_json);
      if (why == rejected.end() || why->second.empty()) continue;
      w.status = fmt::format("failed: {} {}: the family rejected the problem: {}",
                             item.labels.size() == 1 ? "op" : "ops", fmt::join(item.labels, ", "), why->second);
      why->second.clear();
      report.failed++;
      report.items.push_back(w);
      continue;
    }
    if (auto why = unbuildable.find(item.family + "\n" + item.problem_json + "\n" + item.arch); why != unbuildable.end()) {
      // One failure per op and arch (not per bucket), with the family's reason.
      if (why->second.empty()) continue;
      w.status = fmt::format("failed: {} {} on {}: {}", item.labels.size() == 1 ? "op" : "ops",
                             fmt::join(item.labels, ", "), item.arch, why->second);
      why->second.clear();
      report.failed++;
      report.items.push_back(w);
      continue;
    }
    w.tuning_key = tuning_key(pk_it->second, short_buckets(item.buckets));
    report.keys++;
    const bool host_item = item.arch == "host";  // tuned on this CPU (autotune/host_tuner.cpp), GPU or not
    const bool pooled = pooled_arches.count(item.arch) > 0;  // tuned by the worker processes
    const FamilyInfo& fam = family(item.family);
    const bool to_tune = host_item || pooled ? opt.tune : (have_gpu && opt.tune && item.arch == device_arch_name);
    if (!to_tune) {
      w.status = "compiled";
      report.items.push_back(w);
      continue;
    }
    if (!(host_item ? fam.host_workload : fam.workload)) {
      w.status = fmt::format("skipped: {} has no {}tuning workload", item.family, host_item ? "host " : "");
      report.skipped++;
      report.items.push_back(w);
      continue;
    }
    const int64_t token_cap = host_item ? std::min(opt.max_total_tokens, opt.host_max_total_tokens) : opt.max_total_tokens;
    if ((host_item ? item_kv_tokens(item) : total_tokens(item)) > token_cap) {
      w.status = fmt::format("skipped: {} above {} tokens{}", fam.work_tokens_text, token_cap,
                             host_item ? " (host cap)" : "");
      report.skipped++;
      report.items.push_back(w);
      continue;
    }
    if (host_item && gemm_tokens(item) > opt.host_max_gemm_tokens) {
      w.status = fmt::format("skipped: GEMM tokens above {} (host cap)", opt.host_max_gemm_tokens);
      report.skipped++;
      report.items.push_back(w);
      continue;
    }
    if (pooled) {  // the workers check for an existing row, the budget and tune (below, after this loop)
      TuneTask task;
      task.family = item.family;
      task.problem_key = pk_it->second;
      task.buckets = short_buckets(item.buckets);
      task.noise_fraction = opt.tune_options.noise_fraction;
      task.measure = host_item ? host_measure_options() : opt.tune_options.measure;
      task.compile_jobs = opt.tune_options.compile_jobs;
      task.retune = opt.retune;
      pool_tasks.push_back({item.arch, std::move(task)});
      pool_items.push_back(w);
      continue;
    }
    // Another process warming this cache may be tuning the key: wait for it (within the budget), then use its row.
    const KeyClaim claim = claim_key(rt, item.family, w.tuning_key, host_item, opt.retune, flight_wait_s(opt, wall0));
    if (!claim.winner.empty()) {
      w.status = "done earlier";
      w.winner = claim.winner;
      report.already_done++;
      report.items.push_back(w);
      continue;
    }
    if (opt.budget_s > 0 && ms_since(wall0) > opt.budget_s * 1000) {
      w.status = "skipped: budget exhausted";
      report.budget_exhausted = true;
      report.skipped++;
      report.items.push_back(w);
      continue;
    }
    if (!claim.note.empty()) log(LogLevel::warn, "{} {}: {}", item.family, w.tuning_key, claim.note);
    auto ti = Clock::now();
    try {
      TuneOptions to = opt.tune_options;
      if (host_item) {
        to.host = true;
        to.measure = host_measure_options();
      }
      TuneOutcome o = tune(rt, item.family, pk_it->second, short_buckets(item.buckets), to);
      w.status = "tuned";
      w.winner = o.winner;
      report.tuned++;
    } catch (const std::exception& e) {
      w.status = std::string("failed: ") + e.what();
      report.failed++;
    }
    w.ms = ms_since(ti);
    report.tune_ms += w.ms;
    report.items.push_back(w);
    if (opt.progress) opt.progress(w.tuning_key, done, plan.size());
  }
  if (!pool_tasks.empty()) tune_in_workers(rt, opt, pool_tasks, pool_items, wall0, report);
  report.wall_ms = ms_since(wall0);
  return report;
}

}  // namespace ktune::autotune
