// ktune warmup: compile + tune every key a model preset needs; ktune presets: list the embedded presets.
#include <unistd.h>

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "arch_options.hpp"
#include "args.hpp"
#include "autotune/device_list.hpp"
#include "autotune/presets.hpp"
#include "autotune/warmup.hpp"
#include "commands.hpp"
#include "json_writer.hpp"
#include "ktune/device.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "offline_store.hpp"
#include "preset_options.hpp"
#include "progress.hpp"

namespace ktune::cli {
namespace {

const char* kWarmupHelp = R"(usage: ktune warmup --preset NAME|FILE [--arch A[,A...]] [--kv-dtype bf16|fp16|fp8] [--max-batch N]
                    [--max-seq-len N] [--spec-tokens K] [--budget 10m] [--default-only] [--retune] [--cache PATH]
                    [--devices all|N[,N...]] [--workers N] [--key-timeout 30m] [-j N] [--json]
  On a GPU (no --arch, or --arch including the GPU's): compiles every candidate and tunes every
  (op, batch bucket, seq-len bucket) key of the preset, skipping keys this ktune version already tuned on this
  device, so it resumes where it stopped (--retune measures those again and replaces their rows; rows another
  ktune version tuned are never used and always tuned again; GPU rows measured on another NVRTC's binaries stay
  in use and are tuned again). Other arches (or no GPU): compiles the default and every candidate config of each
  problem so the binaries ship; without a GPU and without --arch, every default arch. --budget stops starting new tuning keys after the time given (s, m or h).
  --arch host: compiles for this CPU through the LLVM backend (libktune_host.so) and tunes every key with
  batch x seq_len <= 8192 (sparse_mla_decode: batch x max_q_len x topk) and GEMM tokens <= 4 on it (larger
  keys are skipped: the host cap), GPU or not.
  --devices all|0,1,...: tunes on those GPUs at once, one worker process per GPU (its own context), keys
  dealt out one at a time from a queue that GPUs of one fingerprint share (a GPU of another fingerprint tunes
  its own rows); every compile is done first, once, in this process. Progress lines say which GPU finished
  what ("[dev 1] 12/71 KEY"). A worker that dies loses only the key it held, which another worker retakes;
  keys no worker is left for fail (rerun to resume).
  --workers N: the same with N host CPU workers, for the keys of --arch host (with or without a GPU).
  --default-only: the compile phase builds each problem's default config only (a shipped image that needs
  no tuning candidates); keys this process tunes still compile their candidates as they are measured, so
  "compiled" counts the compile phase and "runtime_compiles" every compile of the run.
  --key-timeout: a worker that holds one key longer (s, m or h; compiles it had to do included) is taken for
  hung, killed, and its key retaken; default: no limit.
  --json prints {"keys", "compiled", "runtime_compiles", "cache_hits", "tuned", "already_done", "failed", ...};
  with workers also "workers", "workers_lost", "retaken" and "by_device" (keys tuned per worker:
  {"dev 0": 12, ...}); "failures" lists what failed as the text form's lines do ([{"family", "arch", "key",
  "status"}]).
  Exits 1 naming the path and the reason when no cache layer is writable or a binary could not be stored;
  refuses to run under KTUNE_JIT=0 (warmup compiles by design).
)";

// The workers run this very binary (`ktune warmup-worker`), so they are always of this version.
std::string self_executable() {
  char path[4096];
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw Error(Status::internal, "warmup", "cannot find this executable (/proc/self/exe) to start workers");
  return std::string(path, static_cast<size_t>(n));
}

// --devices, checked against this machine's GPUs; a bad list is a usage error naming the flag.
std::vector<int> parse_devices_option(const std::string& text) {
  try {
    return autotune::parse_device_list(text, static_cast<int>(system_info().devices.size()), "--devices");
  } catch (const Error& e) {
    std::string message = e.what();
    const std::string prefix = "ktune warmup: ";
    if (message.rfind(prefix, 0) == 0) message = message.substr(prefix.size());
    throw UsageError(message);
  }
}

// {"dev 0": 12, "dev 1": 11}: keys tuned per GPU (or "host N" per host worker).
std::string tuned_by_device(const autotune::WarmupReport& r) {
  std::map<std::pair<bool, int>, int64_t> counts;  // (host worker, index) -> keys tuned
  for (const auto& it : r.items)
    if (it.device >= 0 && it.status == "tuned") counts[{it.arch == "host", it.device}]++;
  JsonObject o;
  for (const auto& [worker, n] : counts) o.num(fmt::format("{} {}", worker.first ? "host" : "dev", worker.second), n);
  return o.dump();
}

}  // namespace

int cmd_warmup(const std::vector<std::string>& argv) {
  for (const auto& a : argv)
    if (a == "--help") return fmt::print("{}", kWarmupHelp), 0;
  std::vector<std::string> valued = preset_option_names();
  valued.insert(valued.end(), {"arch", "budget", "cache", "jobs", "devices", "workers", "key-timeout"});
  Args args(argv, valued, {"json", "default-only", "retune"});
  autotune::WarmupOptions w;
  if (args.has("arch"))
    for (const Arch& a : parse_arch_option(args.get("arch"), true)) w.arches.push_back(a.str());
  w.all_candidates = !args.has("default-only");
  w.retune = args.has("retune");
  w.budget_s = parse_budget(args.get("budget"));
  w.jobs = args.get_int("jobs", 0, 1, 1024);
  w.host_workers = args.get_int("workers", 0, 1, 256);
  if (w.host_workers > 0 && std::find(w.arches.begin(), w.arches.end(), "host") == w.arches.end())
    throw UsageError("--workers: host workers tune the keys of arch host: expected --arch host (or a list with host)");
  if (args.has("devices")) w.devices = parse_devices_option(args.get("devices"));
  if (args.has("key-timeout")) {
    if (w.devices.empty() && w.host_workers == 0)
      throw UsageError("--key-timeout: applies to worker processes: expected --devices or --workers with it");
    w.key_timeout_s = parse_duration(args.get("key-timeout"), "--key-timeout");
  }
  autotune::Preset preset = load_preset_option(args);
  RuntimeOptions o = offline_runtime_options("warmup", args.get("cache"));
  // With --devices every GPU is a worker's; this process only compiles, so it holds no context on GPU 0.
  bool gpu = w.devices.empty() ? make_gpu_current() : false;
  if (!w.devices.empty() || w.host_workers > 0) w.worker_executable = self_executable();
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
    // The failure lines of the text form, one object each.
    std::vector<std::string> failures;
    for (const auto& it : r.items)
      if (it.status.rfind("failed", 0) == 0)
        failures.push_back(JsonObject().str("family", it.family).str("arch", it.arch).str("key", it.tuning_key)
                               .str("status", it.status).dump());
    fmt::print("{}\n", JsonObject()
                           .str("preset", preset.name).num("keys", r.keys).num("compiled", r.compiled)
                           .num("cache_hits", r.cache_hits).num("compile_failed", r.compile_failed)
                           .num("tuned", r.tuned).num("already_done", r.already_done).num("skipped", r.skipped)
                           .num("failed", r.failed).real("compile_wall_ms", r.compile_wall_ms)
                           .real("tune_ms", r.tune_ms).real("wall_ms", r.wall_ms)
                           .boolean("budget_exhausted", r.budget_exhausted).boolean("gpu", gpu)
                           .num("runtime_compiles", s.compiles).str("cache", rt.options().cache_path)
                           .num("workers", r.workers).num("workers_lost", r.workers_lost).num("retaken", r.retaken)
                           .raw("by_device", tuned_by_device(r)).raw("failures", json_array(failures))
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
    if (r.workers > 0)
      fmt::print("workers: {} ({} lost, {} keys retaken); tuned per device: {}\n", r.workers, r.workers_lost,
                 r.retaken, tuned_by_device(r));
    int left = 0;
    for (const auto& it : r.items) left += it.status == "skipped: budget exhausted" ? 1 : 0;
    if (r.budget_exhausted && left > 0) {
      fmt::print("budget of {} ran out: {} keys not tuned (counted as skipped); the same command again resumes\n",
                 args.get("budget"), left);
    }
  }
  // Each lost worker was already logged as a warning (stderr) as it happened, with the key it held.
  if (const std::string unstored = unstored_results(rt); !unstored.empty()) {
    fmt::print(stderr, "ktune warmup: {}\n", unstored);
    return 1;
  }
  // A warmup that found nothing to do on the arches asked (every op of the preset limited to others) stored
  // nothing an image could ship: an arch typo or a preset meant for other GPUs, not a success.
  if (r.keys == 0 && r.failed == 0 && r.compile_failed == 0) {
    fmt::print(stderr, "ktune warmup: no op of preset {} runs on the arches asked; nothing was compiled or tuned\n",
               preset.name);
    return 1;
  }
  return (r.failed || r.compile_failed) ? 1 : 0;
}

int cmd_presets(const std::vector<std::string>& argv) {
  if (!argv.empty() && argv[0] == "--help") {
    fmt::print(
        "usage: ktune presets [--json]\n"
        "  Lists the embedded model presets (each also as NAME-tpN for tensor parallelism N: docs/presets.md).\n"
        "  --json: {{\"presets\": [names], \"details\": [{{\"name\", \"description\", \"tp\", \"spec_tokens\",\n"
        "  \"batch\": [min, max], \"seq_len\": [min, max], \"ops\": [{{\"label\", \"family\"}}]}}]}}.\n");
    return 0;
  }
  Args args(argv, {}, {"json"});
  std::vector<std::string> names = autotune::preset_names();
  if (args.has("json")) {
    std::vector<std::string> q, details;
    for (const auto& n : names) {
      q.push_back(json_quote(n));
      const autotune::Preset p = autotune::load_preset(n);
      std::vector<std::string> ops;
      for (const auto& op : p.ops) ops.push_back(JsonObject().str("label", op.label).str("family", op.family).dump());
      const auto range = [](const autotune::BucketSpec& b) {
        return json_array({std::to_string(b.min), std::to_string(b.max)});
      };
      details.push_back(JsonObject()
                            .str("name", n).str("description", p.description).num("tp", p.tp)
                            .num("spec_tokens", p.spec_tokens).raw("batch", range(p.batch))
                            .raw("seq_len", range(p.seq_len)).raw("ops", json_array(ops))
                            .dump());
    }
    fmt::print("{}\n", JsonObject().raw("presets", json_array(q)).raw("details", json_array(details)).dump());
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
