// ktune replay: run a preset's request buckets from the cache as a serving process would, proving that a
// second process needs neither compiles nor tunings, and showing the config the runtime chose for each op.
#include <algorithm>

#include <fmt/format.h>

#include "args.hpp"
#include "arch_options.hpp"
#include "autotune/warmup.hpp"
#include "commands.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/runtime.hpp"
#include "preset_options.hpp"

namespace ktune::cli {
namespace {

const char* kHelp = R"(usage: ktune replay --preset NAME|FILE [--arch host] [--kv-dtype D] [--max-batch N]
                    [--max-seq-len N] [--spec-tokens K] [--no-preload] [--cache PATH] [--json]
  Runs every request bucket of a preset once from the cache through the family call an engine makes (no forced
  config; each op's kernels loaded before its first timed call unless --no-preload; one op's inputs on the
  device at a time), and reports per op the config the runtime chose and why ("tuned": this device's tuning
  row; "default": none), first-call vs steady-state time, and in total the compiles, tunings and tuning misses.
  A cache with binaries but no tuning rows replays on the defaults.
  Needs a GPU, except with --arch host: the host CPU through the LLVM backend, over the buckets a host warmup
  tunes (batch x seq_len, or batch x topk, <= 8192; GEMM tokens <= 4). Honours KTUNE_JIT=0 (a missing binary
  is then an error, never a compile). Opens the cache read-only: a binary it has to compile is never stored.
  Exit 1 when anything was compiled or tuned, or when no op was replayed (every key skipped).
  --json prints {"compiles", "tunings", "tuning_misses" (lookups that found no row), "untuned_ops" (ops that ran
  a default), "skipped", "ops": [{"key", "config", "source", ...}], ...}.
)";

}  // namespace

int cmd_replay(const std::vector<std::string>& argv) {
  for (const auto& a : argv)
    if (a == "--help") return fmt::print("{}", kHelp), 0;
  std::vector<std::string> valued = preset_option_names();
  valued.insert(valued.end(), {"arch", "cache"});
  Args args(argv, valued, {"json", "no-preload"});
  const std::string arch = args.get("arch");
  if (!arch.empty() && arch != "host")
    throw UsageError("--arch: replay runs on the present GPU (no --arch) or on the host CPU (--arch host), got '" +
                     arch + "'");
  autotune::Preset preset = load_preset_option(args);
  if (arch.empty() && !make_gpu_current()) throw UsageError("replay needs a GPU (or --arch host for the host CPU)");
  RuntimeOptions o = RuntimeOptions::from_env();
  if (args.has("cache")) o.cache_path = args.get("cache");
  // A replay checks a cache and changes nothing in it: what it has to compile is counted (and fails the replay),
  // never stored, so a second replay cannot pass on the first one's binaries.
  o.read_only = true;
  Runtime rt(o);
  const int64_t max_tokens = arch == "host" ? autotune::WarmupOptions{}.host_max_total_tokens : autotune::WarmupOptions{}.max_total_tokens;
  autotune::ReplayReport r = autotune::replay(rt, preset, max_tokens, !args.has("no-preload"), arch);

  double worst_ratio = 0;
  int64_t untuned = 0;  // ops that ran a default: no usable tuning row for their key (tuning_misses counts lookups)
  cache::Json ops = cache::Json::array();
  for (const auto& op : r.ops) {
    untuned += op.tuned ? 0 : 1;
    const double ratio = op.steady_call_ms > 0 ? op.first_call_ms / op.steady_call_ms : 0;
    worst_ratio = std::max(worst_ratio, ratio);
    cache::Json labels = cache::Json::array();
    for (const auto& l : op.labels) labels.push(l);
    ops.push(cache::Json::object()
                 .set("family", op.family).set("labels", std::move(labels)).set("key", op.tuning_key)
                 .set("config", op.config).set("source", op.source).set("tuned", op.tuned)
                 .set("first_call_ms", op.first_call_ms).set("steady_call_ms", op.steady_call_ms)
                 .set("ratio", ratio));
  }
  if (args.has("json")) {
    fmt::print("{}\n", cache::Json::object()
                           .set("preset", preset.name).set("compiles", r.stats.compiles).set("tunings", r.tunings)
                           .set("tuning_misses", r.stats.tuning_misses).set("untuned_ops", untuned)
                           .set("cache_hits", r.stats.cache_hits)
                           .set("loads", r.stats.loads).set("load_all_ms", r.load_all_ms)
                           .set("worst_first_over_steady", worst_ratio).set("skipped", r.skipped)
                           .set("ops", std::move(ops))
                           .dump());
  } else {
    fmt::print("| op | key | config | source | first ms | steady ms | ratio |\n|---|---|---|---|---|---|---|\n");
    for (const auto& op : r.ops)
      fmt::print("| {} | {} | {} | {} | {:.3f} | {:.3f} | {:.2f} |\n", fmt::join(op.labels, ", "), op.tuning_key,
                 op.config, op.source, op.first_call_ms, op.steady_call_ms,
                 op.steady_call_ms > 0 ? op.first_call_ms / op.steady_call_ms : 0);
    fmt::print("ops {} ({} untuned) | skipped {} | compiles {} | tunings {} | tuning misses {} | loaded {} kernels in "
               "{:.1f} ms | worst first/steady {:.2f}\n",
               r.ops.size(), untuned, r.skipped, r.stats.compiles, r.tunings, r.stats.tuning_misses, r.stats.loads,
               r.load_all_ms, worst_ratio);
  }
  // A replay that ran nothing proved nothing: every key was outside what it covers (see --help).
  if (r.ops.empty()) {
    fmt::print(stderr, "ktune replay: no op was replayed ({} of the preset's keys skipped: no {}workload, or above "
                       "the replay's caps)\n", r.skipped, arch == "host" ? "host " : "");
    return 1;
  }
  return r.stats.compiles == 0 && r.tunings == 0 ? 0 : 1;
}

}  // namespace ktune::cli
