// ktune compile: build kernels for explicit arches into the cache, on a thread pool. Needs no GPU.
#include <algorithm>
#include <atomic>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "arch_options.hpp"
#include "args.hpp"
#include "commands.hpp"
#include "json_writer.hpp"
#include "ktune/arch.hpp"
#include "ktune/cache_admin.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "offline_store.hpp"
#include "progress.hpp"

namespace ktune::cli {
namespace {

const char* kHelp = R"(usage: ktune compile --family F --arch A[,A...] [--problem KEY | --config JSON] [--all-configs]
                     [--cache PATH] [-j N] [--json]
  Compiles family F for each arch (e.g. sm_90a,sm_100a,sm_120a) into the first writable cache layer; exits 1
  naming the path and the reason when no layer is writable or a result could not be stored, and refuses to
  run under KTUNE_JIT=0.
  --problem KEY   a readable problem key (as `ktune cache ls` prints it); repeatable with ';'
  --config JSON   a JSON object of problem fields (as in a preset's ops, docs/presets.md); without
                  --problem/--config the family's example problems are compiled
  --all-configs   every candidate tile config of the search space, not just the default
                  (either way, a family's shared module of each problem is compiled too: the
                  kernels no tile config changes, such as a split-KV combine)
  -j N            parallel compiles (default: number of cores)
  --json          one JSON object: {"compiled": N, "cache_hits": N, "failed": N, "kernels": [...]}
)";

struct Job {
  std::string problem, config;
  Arch arch;
};

}  // namespace

int cmd_compile(const std::vector<std::string>& argv) {
  for (const auto& a : argv)
    if (a == "--help") {
      fmt::print("{}", kHelp);
      return 0;
    }
  Args args(argv, {"family", "arch", "problem", "config", "cache", "jobs"}, {"json", "all-configs"});
  const FamilyInfo& fam = family_option(args);
  if (!args.has("arch")) throw UsageError("--arch is required (e.g. --arch sm_90a,sm_120a)");
  const std::vector<Arch> arches = parse_arch_option(args.get("arch"), true);
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const int workers = args.get_int("jobs", cores, 1, 1024);

  if (args.has("problem") && args.has("config")) throw UsageError("give --problem KEY or --config JSON, not both");
  std::vector<std::string> problems;
  if (args.has("problem")) {
    for (const auto& p : split(args.get("problem"), ';')) problems.push_back(fam.canonical_problem(p));
    if (problems.empty()) throw UsageError("--problem: expected one or more problem keys separated by ';'");
  } else if (args.has("config")) {
    problems.push_back(fam.problem_from_json(args.get("config")));
  } else {
    problems = fam.example_problems();
  }

  std::vector<Job> jobs;
  for (const auto& arch : arches)
    for (const auto& p : problems) {
      if (args.has("all-configs")) {
        for (const auto& c : fam.search_space(p, arch, arch_limits(arch))) jobs.push_back({p, c, arch});
      } else {
        jobs.push_back({p, fam.default_config(p, arch), arch});
      }
      for (const auto& c : shared_module_configs(fam, p, arch)) jobs.push_back({p, c, arch});
    }

  Runtime rt(offline_runtime_options("compile", args.get("cache")));
  require_writable_layer(rt, "compile");

  bool json = args.has("json");
  Progress progress("compile", static_cast<int>(jobs.size()), json);
  std::atomic<size_t> next{0};
  std::atomic<int> compiled{0}, hits{0}, failed{0};
  std::mutex out_mutex;
  std::vector<std::string> kernel_json, failures;
  auto worker = [&] {
    for (size_t i = next++; i < jobs.size(); i = next++) {
      const Job& j = jobs[i];
      std::string label = fmt::format("{}/{}/{}/{}", fam.name, j.arch.str(), j.problem, j.config);
      try {
        EnsureResult r = rt.ensure_binary(fam.generate(j.problem, j.config, j.arch), j.arch);
        (r.compiled ? compiled : hits)++;
        std::lock_guard<std::mutex> lock(out_mutex);
        kernel_json.push_back(JsonObject().str("name", r.name).str("digest", r.digest)
                                  .boolean("compiled", r.compiled).real("compile_ms", r.compile_ms).dump());
      } catch (const Error& e) {
        failed++;
        std::lock_guard<std::mutex> lock(out_mutex);
        failures.push_back(fmt::format("{}: {}", label, e.what()));
      }
      progress.step(label);
    }
  };
  std::vector<std::thread> pool;
  for (int w = 0; w < std::min<int>(workers, static_cast<int>(jobs.size())); ++w) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  progress.finish();

  RuntimeStats s = rt.stats();
  if (json) {
    std::vector<std::string> fails;
    for (const auto& f : failures) fails.push_back(json_quote(f));
    fmt::print("{}\n", JsonObject()
                           .num("compiled", compiled).num("cache_hits", hits).num("failed", failed)
                           .real("compile_ms", s.compile_ms).str("cache", rt.options().cache_path)
                           .raw("kernels", json_array(kernel_json)).raw("failures", json_array(fails))
                           .dump());
  } else {
    for (const auto& f : failures) fmt::print(stderr, "failed: {}\n", f);
    fmt::print("{} kernels: {} compiled ({:.0f} ms compiling), {} from cache, {} failed — cache {}\n", jobs.size(),
               compiled.load(), s.compile_ms, hits.load(), failed.load(), rt.options().cache_path);
  }
  return failed ? 1 : 0;
}

}  // namespace ktune::cli
