// ktune warmup: compile + tune every key a model preset needs; ktune presets: list the embedded presets.
#include <fmt/format.h>

#include "arch_options.hpp"
#include "args.hpp"
#include "autotune/presets.hpp"
#include "autotune/warmup.hpp"
#include "commands.hpp"
#include "json_writer.hpp"
#include "ktune/device.hpp"
#include "ktune/runtime.hpp"
#include "offline_store.hpp"
#include "preset_options.hpp"
#include "progress.hpp"

namespace ktune::cli {
namespace {

const char* kWarmupHelp = R"(usage: ktune warmup --preset NAME|FILE [--arch A[,A...]] [--kv-dtype bf16|fp16|fp8] [--max-batch N]
                    [--max-seq-len N] [--spec-tokens K] [--budget 10m] [--default-only] [--cache PATH]
                    [-j N] [--json]
  On a GPU (no --arch, or --arch including the GPU's): compiles every candidate and tunes every
  (op, batch bucket, seq-len bucket) key of the preset, skipping keys already tuned on this device, so it
  resumes where it stopped. Other arches (or no GPU): compiles the default and every candidate config of each
  problem so the binaries ship; without a GPU and without --arch, every default arch. --budget stops starting new tuning keys after the time given (s, m or h).
  --arch host: compiles for this CPU through the LLVM backend (libktune_host.so) and tunes every key with
  batch x seq_len <= 8192 (sparse_mla_decode: batch x max_q_len x topk) and GEMM tokens <= 4 on it (larger
  keys are skipped: the host cap), GPU or not.
  --json prints {"keys", "compiled", "cache_hits", "tuned", "already_done", "failed", ...}.
  Exits 1 naming the path and the reason when no cache layer is writable or a binary could not be stored;
  refuses to run under KTUNE_JIT=0 (warmup compiles by design).
)";

}  // namespace

int cmd_warmup(const std::vector<std::string>& argv) {
  for (const auto& a : argv)
    if (a == "--help") return fmt::print("{}", kWarmupHelp), 0;
  std::vector<std::string> valued = preset_option_names();
  valued.insert(valued.end(), {"arch", "budget", "cache", "jobs"});
  Args args(argv, valued, {"json", "default-only"});
  autotune::WarmupOptions w;
  if (args.has("arch"))
    for (const Arch& a : parse_arch_option(args.get("arch"), true)) w.arches.push_back(a.str());
  w.all_candidates = !args.has("default-only");
  w.budget_s = parse_budget(args.get("budget"));
  w.jobs = args.get_int("jobs", 0, 1, 1024);
  autotune::Preset preset = load_preset_option(args);
  RuntimeOptions o = offline_runtime_options("warmup", args.get("cache"));
  bool gpu = make_gpu_current();
  Runtime rt(o);
  require_writable_layer(rt, "warmup");
  bool json = args.has("json");
  std::unique_ptr<Progress> bar;
  std::string phase;
  w.progress = [&](const std::string& what, size_t done, size_t total) {
    std::string p = what == "compile" ? "compile" : "tune";
    if (p != phase) {
      if (bar) bar->finish();
      bar = std::make_unique<Progress>(p, static_cast<int>(total), json);
      phase = p;
    }
    bar->step(what);
    (void)done;
  };
  autotune::WarmupReport r = autotune::warmup(rt, preset, w);
  if (bar) bar->finish();
  RuntimeStats s = rt.stats();
  if (json) {
    fmt::print("{}\n", JsonObject()
                           .str("preset", preset.name).num("keys", r.keys).num("compiled", r.compiled)
                           .num("cache_hits", r.cache_hits).num("compile_failed", r.compile_failed)
                           .num("tuned", r.tuned).num("already_done", r.already_done).num("skipped", r.skipped)
                           .num("failed", r.failed).real("compile_wall_ms", r.compile_wall_ms)
                           .real("tune_ms", r.tune_ms).real("wall_ms", r.wall_ms)
                           .boolean("budget_exhausted", r.budget_exhausted).boolean("gpu", gpu)
                           .num("runtime_compiles", s.compiles).str("cache", rt.options().cache_path)
                           .dump());
  } else {
    fmt::print("| preset | keys | compiled | cache hits | compile failed | tuned | done earlier | skipped | failed | compile s | tune s | wall s |\n");
    fmt::print("|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    fmt::print("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {:.1f} | {:.1f} | {:.1f} |\n", preset.name, r.keys,
               r.compiled, r.cache_hits, r.compile_failed, r.tuned, r.already_done, r.skipped, r.failed,
               r.compile_wall_ms / 1000, r.tune_ms / 1000, r.wall_ms / 1000);
    for (const auto& it : r.items)
      if (it.status.rfind("failed", 0) == 0)
        fmt::print("  {}{}{}: {}\n", it.family, it.tuning_key.empty() ? "" : " ", it.tuning_key, it.status);
  }
  if (const std::string unstored = unstored_results(rt); !unstored.empty()) {
    fmt::print(stderr, "ktune warmup: {}\n", unstored);
    return 1;
  }
  return (r.failed || r.compile_failed) ? 1 : 0;
}

int cmd_presets(const std::vector<std::string>& argv) {
  Args args(argv, {}, {"json"});
  std::vector<std::string> names = autotune::preset_names();
  if (args.has("json")) {
    std::vector<std::string> q;
    for (const auto& n : names) q.push_back(json_quote(n));
    fmt::print("{}\n", JsonObject().raw("presets", json_array(q)).dump());
    return 0;
  }
  for (const auto& n : names) {
    autotune::Preset p = autotune::load_preset(n);
    fmt::print("{:<24} {} ops, batch {}..{}, seq_len {}..{} — {}\n", n, p.ops.size(), p.batch.min, p.batch.max,
               p.seq_len.min, p.seq_len.max, p.description);
  }
  return 0;
}

}  // namespace ktune::cli
