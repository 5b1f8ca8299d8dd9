// Replay: every request bucket of a preset once from the cache, through the family call an engine makes (no
// forced config), on the current GPU or on the host CPU. What each op ran is the family's plan of that same
// call (the resolve step its launch uses), so the report says which config the runtime chose and why
// (tuned row or default), and a cache with binaries but no tuning rows replays on its defaults.
#include <algorithm>
#include <chrono>
#include <functional>
#include <memory>

#include <fmt/format.h>

#include "autotune/host_workload.hpp"
#include "autotune/plan.hpp"
#include "autotune/warmup.hpp"
#include "autotune/workload.hpp"
#include "ktune_internal/gpu.hpp"
#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/tuning.hpp"

namespace ktune::autotune {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

// A family of this build with a workload for the target (a replay times its workload's engine call).
bool replayable(const std::string& name, bool host) {
  for (const auto& f : families())
    if (f.name == name) return bool(host ? f.host_workload : f.workload);
  return false;
}

int64_t bucket(const WorkItem& item, const char* dim) {
  for (const auto& b : item.buckets)
    if (b.dim == dim) return b.value;
  return 0;
}

// The items a replay runs: on the host the keys a host warmup tunes (its caps), on a GPU those within the KV
// capacity given; replaying others would only miss.
bool replayed(const WorkItem& item, bool host, int64_t max_total_tokens) {
  if (!replayable(item.family, host)) return false;
  if (host)
    return item_kv_tokens(item) <= max_total_tokens && bucket(item, "tokens") <= WarmupOptions{}.host_max_gemm_tokens;
  return std::max<int64_t>(bucket(item, "batch"), 1) * std::max<int64_t>(bucket(item, "seq_len"), 1) <=
         max_total_tokens;
}

}  // namespace

ReplayReport replay(Runtime& rt, const Preset& preset_in, int64_t max_total_tokens, bool preload,
                    const std::string& arch) {
  const bool host = arch == "host";
  ReplayReport report;
  const int64_t tunings_before = tunings_performed();
  const Preset preset = with_pow2_buckets(preset_in);

  // A GPU replay times every call to completion on one stream; the host calls are synchronous.
  std::unique_ptr<internal::Stream> gpu_stream = host ? nullptr : std::make_unique<internal::Stream>();
  void* stream = gpu_stream ? gpu_stream->get() : nullptr;
  const auto sync = [&] {
    if (gpu_stream) gpu_stream->synchronize("cuStreamSynchronize");
  };

  // One op at a time: its workload (device inputs, rotated over copies) lives only while its calls run, so the
  // replay needs the largest op's inputs in device memory, not the sum of every op's (a preset's buckets
  // together exceed an 80 GB GPU).
  const std::string engine;  // no forced config: the call an engine makes
  const int steady_calls = host ? 5 : 15;
  for (const WorkItem& item : make_plan(preset, {host ? std::string("host") : rt.current_arch().str()})) {
    if (!replayed(item, host, max_total_tokens)) {
      report.skipped++;
      continue;
    }
    std::string pk;
    try {
      pk = family(item.family).problem_from_json(item.problem_json);
    } catch (const Error& e) {
      throw Error(Status::invalid_argument, "replay",
                  fmt::format("{} {}: the family rejected the problem: {}", item.labels.size() == 1 ? "op" : "ops",
                              fmt::join(item.labels, ", "), e.what()));
    }
    ReplayOp op;
    op.family = item.family;
    op.labels = item.labels;
    op.tuning_key = tuning_key(pk, short_buckets(item.buckets));
    const WorkloadFactory make = host ? host_workload_factory(item.family) : workload_factory(item.family);
    const std::unique_ptr<Workload> workload = make(rt, pk, short_buckets(item.buckets));
    if (preload) {  // the op's kernels loaded before its first timed call, as a server loads them at start
      auto t0 = Clock::now();
      workload->prepare(engine);
      report.load_all_ms += ms_since(t0);
    }
    const ChosenConfig chosen = workload->chosen(engine);
    op.config = chosen.config;
    op.source = chosen.source;
    op.tuned = chosen.source == "tuned";
    sync();
    auto t0 = Clock::now();
    workload->launch(engine, stream);
    sync();
    op.first_call_ms = ms_since(t0);
    std::vector<double> steady;
    for (int i = 0; i < steady_calls; ++i) {
      t0 = Clock::now();
      workload->launch(engine, stream);
      sync();
      steady.push_back(ms_since(t0));
    }
    std::sort(steady.begin(), steady.end());
    op.steady_call_ms = steady[steady.size() / 2];
    report.ops.push_back(op);
  }
  report.stats = rt.stats();
  report.tunings = tunings_performed() - tunings_before;
  return report;
}

}  // namespace ktune::autotune
