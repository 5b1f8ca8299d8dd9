// ktune warmup: compile + tune every key a model preset needs; ktune replay: prove a second process needs
// neither; ktune presets: list the embedded presets.
#include <fmt/format.h>

#include "args.hpp"
#include "autotune/presets.hpp"
#include "autotune/warmup.hpp"
#include "commands.hpp"
#include "json_writer.hpp"
#include "ktune/device.hpp"
#include "ktune/runtime.hpp"
#include "offline_store.hpp"
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

const char* kReplayHelp = R"(usage: ktune replay --preset NAME|FILE [--arch host] [warmup's bucket options] [--no-preload] [--cache PATH] [--json]
  Runs every request bucket of a preset once from the cache, as a serving process would (kernels preloaded at
  start unless --no-preload), and reports compiles, tunings, tuning misses, and first-call vs steady-state time
  per op. Needs a GPU, except with --arch host: the host CPU through the LLVM backend, over the buckets a host
  warmup tunes (batch x seq_len, or batch x topk, <= 8192; GEMM tokens <= 4). --json prints {"compiles": N, "tunings": N, "tuning_misses": N, "ops": [...]}.
)";

double parse_budget(const std::string& s) {
  if (s.empty()) return 0;
  char unit = s.back();
  double mult = unit == 'h' ? 3600 : unit == 'm' ? 60 : 1;
  std::string num = (unit == 'h' || unit == 'm' || unit == 's') ? s.substr(0, s.size() - 1) : s;
  try {
    return std::stod(num) * mult;
  } catch (const std::exception&) {
    throw UsageError("--budget: expected a duration like 90s, 10m or 1h, got '" + s + "'");
  }
}

std::optional<int> opt_int(const Args& a, const char* name) {
  if (!a.has(name)) return std::nullopt;
  return a.get_int(name, 0);
}

autotune::Preset load(const Args& args) {
  if (!args.has("preset")) throw UsageError("--preset is required (see ktune presets)");
  autotune::Preset p = autotune::load_preset(args.get("preset"));
  std::optional<std::string> kv;
  if (args.has("kv-dtype")) kv = args.get("kv-dtype");
  return autotune::with_overrides(p, kv, opt_int(args, "max-batch"), opt_int(args, "max-seq-len"),
                                  opt_int(args, "spec-tokens"));
}

bool has_gpu() {
  SystemInfo s = system_info();
  if (s.devices.empty()) return false;
  use_device(0);
  return true;
}

}  // namespace

int cmd_warmup(const std::vector<std::string>& argv) {
  for (const auto& a : argv)
    if (a == "--help") return fmt::print("{}", kWarmupHelp), 0;
  Args args(argv, {"preset", "arch", "kv-dtype", "max-batch", "max-seq-len", "spec-tokens", "budget", "cache", "jobs"},
            {"json", "default-only"});
  autotune::Preset preset = load(args);
  RuntimeOptions o = offline_runtime_options("warmup", args.get("cache"));
  bool gpu = has_gpu();
  Runtime rt(o);
  require_writable_layer(rt, "warmup");
  autotune::WarmupOptions w;
  if (args.has("arch")) w.arches = split(args.get("arch"), ',');
  w.all_candidates = !args.has("default-only");
  w.budget_s = parse_budget(args.get("budget"));
  w.jobs = args.get_int("jobs", 0);
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
      if (it.status.rfind("failed", 0) == 0) fmt::print("  {} {}: {}\n", it.family, it.tuning_key, it.status);
  }
  if (const std::string unstored = unstored_results(rt); !unstored.empty()) {
    fmt::print(stderr, "ktune warmup: {}\n", unstored);
    return 1;
  }
  return (r.failed || r.compile_failed) ? 1 : 0;
}

int cmd_replay(const std::vector<std::string>& argv) {
  for (const auto& a : argv)
    if (a == "--help") return fmt::print("{}", kReplayHelp), 0;
  Args args(argv, {"preset", "arch", "kv-dtype", "max-batch", "max-seq-len", "spec-tokens", "cache"},
            {"json", "no-preload"});
  autotune::Preset preset = load(args);
  const std::string arch = args.has("arch") ? args.get("arch") : "";
  if (!arch.empty() && arch != "host")
    throw UsageError("--arch: replay runs on the present GPU (no --arch) or on the host CPU (--arch host), got '" +
                     arch + "'");
  if (arch.empty() && !has_gpu()) throw UsageError("replay needs a GPU (or --arch host for the host CPU)");
  RuntimeOptions o = RuntimeOptions::from_env();
  if (args.has("cache")) o.cache_path = args.get("cache");
  Runtime rt(o);
  const int64_t max_tokens = arch == "host" ? autotune::WarmupOptions{}.host_max_total_tokens : int64_t{1} << 21;
  autotune::ReplayReport r = autotune::replay(rt, preset, max_tokens, !args.has("no-preload"), arch);
  double worst_ratio = 0;
  std::vector<std::string> ops;
  for (const auto& op : r.ops) {
    double ratio = op.steady_call_ms > 0 ? op.first_call_ms / op.steady_call_ms : 0;
    worst_ratio = std::max(worst_ratio, ratio);
    ops.push_back(JsonObject().str("key", op.tuning_key).str("config", op.config).boolean("tuned", op.tuned)
                      .real("first_call_ms", op.first_call_ms).real("steady_call_ms", op.steady_call_ms)
                      .real("ratio", ratio).dump());
  }
  if (args.has("json")) {
    fmt::print("{}\n", JsonObject()
                           .str("preset", preset.name).num("compiles", r.stats.compiles).num("tunings", r.tunings)
                           .num("tuning_misses", r.stats.tuning_misses).num("cache_hits", r.stats.cache_hits)
                           .num("loads", r.stats.loads).real("load_all_ms", r.load_all_ms)
                           .real("worst_first_over_steady", worst_ratio).raw("ops", json_array(ops))
                           .dump());
  } else {
    fmt::print("| op key | config | tuned | first ms | steady ms | ratio |\n|---|---|---|---|---|---|\n");
    for (const auto& op : r.ops)
      fmt::print("| {} | {} | {} | {:.3f} | {:.3f} | {:.2f} |\n", op.tuning_key, op.config, op.tuned ? "yes" : "no",
                 op.first_call_ms, op.steady_call_ms, op.steady_call_ms > 0 ? op.first_call_ms / op.steady_call_ms : 0);
    fmt::print("ops {} | compiles {} | tunings {} | tuning misses {} | loaded {} kernels in {:.1f} ms | worst first/steady {:.2f}\n",
               r.ops.size(), r.stats.compiles, r.tunings, r.stats.tuning_misses, r.stats.loads, r.load_all_ms, worst_ratio);
  }
  return r.stats.compiles == 0 && r.tunings == 0 ? 0 : 1;
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
