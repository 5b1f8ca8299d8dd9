// `ktune_stress runtime`: P processes x T threads racing through the real Runtime (real NVRTC) for the same K
// missing kernels on one cache file. The runtime is single-flight within a process (threads) and across
// processes (a per-key lock next to the writable layer): each missing key is compiled exactly once in all,
// the other processes load the stored row, and the file ends with one whole row per key. With --load (a GPU
// machine) the threads go through Runtime::get, so the module table is raced as well: one load per key per
// process.
#include <fmt/format.h>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <random>
#include <sstream>
#include <thread>

#include "ktune/cache_admin.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "ktune_internal/compiler.hpp"
#include "stress_common.hpp"
#include "support/test_kernels.hpp"

namespace ktune::stress {
namespace {

struct ProcResult {
  std::vector<int> compiled_flags;  // per kernel: EnsureResult::compiled seen
  int64_t compiles = 0, cache_hits = 0, memory_hits = 0, loads = 0, errors = 0, calls = 0;
  std::string problem;
};

class StartGate {
 public:
  explicit StartGate(int n) : waiting_(n) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mu_);
    if (--waiting_ == 0) cv_.notify_all();
    cv_.wait(lock, [&] { return waiting_ <= 0; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int waiting_;
};

int process(const std::string& db, const std::string& out, int proc, int threads, int kernels, int base,
            const Arch& arch, bool load) {
  RuntimeOptions o;
  o.cache_path = db;
  Runtime rt(o);
  std::vector<std::atomic<int>> compiled(static_cast<size_t>(kernels));
  std::atomic<int64_t> errors{0}, calls{0};
  std::mutex problem_mu;
  std::string problem;
  StartGate gate(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      std::vector<int> order(static_cast<size_t>(kernels));
      for (int k = 0; k < kernels; ++k) order[static_cast<size_t>(k)] = k;
      std::mt19937 rng(static_cast<unsigned>(proc * 1000 + t));
      std::shuffle(order.begin(), order.end(), rng);
      try {
        if (load) use_device(0);
      } catch (const std::exception& e) {
        errors++;
        std::lock_guard<std::mutex> lock(problem_mu);
        problem = e.what();
      }
      gate.arrive_and_wait();
      for (int round = 0; round < 2; ++round) {
        for (int k : order) {
          calls++;
          try {
            const GeneratedKernel kernel = test::scale_kernel(base + k);
            if (load) {
              const LoadedKernel& lk = rt.get(fmt::format("stress/{}", base + k), [&] { return kernel; });
              if (lk.functions.size() != 1) throw std::runtime_error("loaded kernel without its entry point");
            } else if (rt.ensure_binary(kernel, arch).compiled) {
              compiled[static_cast<size_t>(k)]++;
            }
          } catch (const std::exception& e) {
            errors++;
            std::lock_guard<std::mutex> lock(problem_mu);
            if (problem.empty()) problem = e.what();
          }
        }
      }
    });
  }
  for (auto& th : pool) th.join();
  RuntimeStats s = rt.stats();
  std::ofstream f(out);
  f << "compiles " << s.compiles << "\ncache_hits " << s.cache_hits << "\nmemory_hits " << s.memory_hits
    << "\nloads " << s.loads << "\nerrors " << errors.load() << "\ncalls " << calls.load() << "\n";
  for (int k = 0; k < kernels; ++k) f << "compiled " << compiled[static_cast<size_t>(k)].load() << "\n";
  if (!problem.empty()) f << "problem " << problem << "\n";
  return errors ? 2 : 0;
}

ProcResult read_proc(const std::string& path) {
  ProcResult r;
  std::ifstream f(path);
  std::string line;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string tag;
    int64_t v = 0;
    in >> tag;
    if (tag == "problem") {
      r.problem = line.substr(8);
      continue;
    }
    in >> v;
    if (tag == "compiles") r.compiles = v;
    else if (tag == "cache_hits") r.cache_hits = v;
    else if (tag == "memory_hits") r.memory_hits = v;
    else if (tag == "loads") r.loads = v;
    else if (tag == "errors") r.errors = v;
    else if (tag == "calls") r.calls = v;
    else if (tag == "compiled") r.compiled_flags.push_back(static_cast<int>(v));
  }
  return r;
}

}  // namespace

int run_runtime_race(Options& o) {
  const int procs = o.num("procs", 4), threads = o.num("threads", 32), kernels = o.num("kernels", 4);
  const Arch arch = Arch::parse(o.str("arch", "sm_90a"));
  const bool load = o.flag("load");
  // With --load the parent must not load NVRTC before forking: NVRTC may initialise the CUDA driver, and CUDA
  // refuses cuInit in a child forked after that (CUDA_ERROR_NOT_INITIALIZED). --parent-nvrtc does it anyway,
  // to show the failure.
  const bool parent_nvrtc = !load || o.flag("parent-nvrtc");
  const std::string json = o.str("json", "");
  std::string dir = o.str("dir", "");
  const bool keep = o.flag("keep");
  o.done();
  std::string why;
  if (parent_nvrtc && !internal::nvrtc_loadable(&why)) {
    fmt::print("ktune_stress runtime: SKIPPED: {}\n", why);
    return 77;
  }
  if (dir.empty()) dir = temp_dir("runtime");
  const std::string db = dir + "/ktune.db";
  // Kernels no earlier run compiled (the file is new anyway; the constants keep keys distinct per run).
  const int base = 100000 + static_cast<int>(::getpid() % 100000) * 10;

  const double t0 = now_seconds();
  std::vector<pid_t> pids;
  for (int p = 0; p < procs; ++p)
    pids.push_back(spawn([&, p] {
      return process(db, fmt::format("{}/proc.{}", dir, p), p, threads, kernels, base, arch, load);
    }));
  int crashed = 0;
  for (pid_t pid : pids)
    if (int rc = wait_for(pid); rc != 0 && rc != 2) ++crashed;
  const double elapsed = now_seconds() - t0;

  Report rep("runtime");
  int64_t errors = 0, calls = 0, compiles = 0, over_one = 0, flag_mismatch = 0, max_per_proc = 0, loads_wrong = 0;
  std::vector<int64_t> per_key(static_cast<size_t>(kernels), 0);
  for (int p = 0; p < procs; ++p) {
    ProcResult r = read_proc(fmt::format("{}/proc.{}", dir, p));
    errors += r.errors;
    calls += r.calls;
    compiles += r.compiles;
    if (!r.problem.empty()) rep.fail(fmt::format("process {}: {}", p, r.problem));
    if (load) {
      if (r.loads != kernels) ++loads_wrong;
      if (r.compiles > kernels) ++over_one;
      continue;
    }
    int64_t flagged = 0;
    for (int k = 0; k < kernels && k < static_cast<int>(r.compiled_flags.size()); ++k) {
      const int c = r.compiled_flags[static_cast<size_t>(k)];
      per_key[static_cast<size_t>(k)] += c;
      flagged += c;
      max_per_proc = std::max<int64_t>(max_per_proc, c);
      if (c > 1) ++over_one;
    }
    if (flagged != r.compiles) ++flag_mismatch;
  }
  // The file: exactly one whole row per key, and a fresh process with KTUNE_JIT=0 finds them all.
  int64_t rows = 0, verify_issues = 0, missing_after = 0;
  try {
    rows = static_cast<int64_t>(cache_list(db).size());
    verify_issues = static_cast<int64_t>(cache_verify(db).size());
    RuntimeOptions strict;
    strict.cache_path = db;
    strict.allow_jit = false;
    Runtime rt(strict);
    for (int k = 0; k < kernels; ++k) {
      try {
        if (rt.ensure_binary(test::scale_kernel(base + k), arch).compiled) ++missing_after;
      } catch (const Error&) {
        ++missing_after;
      }
    }
  } catch (const std::exception& e) {
    rep.fail(std::string("checking the file: ") + e.what());
  }
  std::string spread;
  for (int64_t c : per_key) spread += (spread.empty() ? "" : ",") + std::to_string(c);

  rep.count("processes", procs);
  rep.count("threads_per_process", threads);
  rep.count("missing_kernels", kernels);
  rep.count("calls", calls);
  rep.count("compiles_total", compiles);
  if (!load) {
    rep.text("compiles_per_key_all_processes", spread);
    rep.count("max_compiles_per_key_per_process", max_per_proc);
    rep.count("keys_compiled_more_than_once_per_process", over_one, true);
    rep.count("compiled_flag_vs_stats_mismatch", flag_mismatch, true);
  } else {
    rep.count("processes_with_loads_not_one_per_key", loads_wrong, true);
    rep.count("processes_with_more_compiles_than_keys", over_one, true);
  }
  // Across processes too: every key compiled once in all (none twice, none never).
  int64_t keys_not_once = 0;
  for (int64_t c : per_key) keys_not_once += c != 1;
  if (!load) rep.count("keys_not_compiled_exactly_once_in_all_processes", keys_not_once, true);
  if (load && compiles != kernels)
    rep.fail(fmt::format("{} compiles in all processes for {} kernels", compiles, kernels));
  rep.count("rows_in_file", rows);
  if (rows != kernels) rep.fail(fmt::format("{} rows in the file for {} kernels", rows, kernels));
  rep.count("errors", errors, true);
  rep.count("processes_crashed", crashed, true);
  rep.count("verify_issues", verify_issues, true);
  rep.count("missing_for_a_fresh_jit0_process", missing_after, true);
  rep.text("integrity_check", integrity_check(db), "ok");
  const int rc = rep.finish(json, elapsed);
  if (!keep && rc == 0) std::filesystem::remove_all(dir);
  else fmt::print("  files kept in {}\n", dir);
  return rc;
}

}  // namespace ktune::stress
