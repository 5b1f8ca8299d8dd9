// ktune tune: tune one key on this GPU and print every candidate's time.
#include <algorithm>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "args.hpp"
#include "autotune/buckets.hpp"
#include "autotune/host_tuner.hpp"
#include "autotune/tuner.hpp"
#include "commands.hpp"
#include "json_writer.hpp"
#include "ktune/device.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune/error.hpp"
#include "ktune/tuning.hpp"
#include "offline_store.hpp"

namespace ktune::cli {
namespace {

const char* kHelp = R"(usage: ktune tune --family F (--problem KEY | --config JSON) [--batch N] [--max-seq-len N] [--tokens M]
                  [--arch host] [--no-persist] [--cache PATH] [--json]
  Tunes one key on GPU 0: compiles every candidate config, measures each on rotating random inputs (median of
  samples, re-measured while noisy), picks the first within 2% of the fastest, stores the whole table with the
  device fingerprint, and prints it. The key's buckets are the family's tuning dims, each given by its option
  and rounded up to a power of two: batch (--batch), seq_len (--max-seq-len), tokens (--tokens); e.g.
  xqa_decode takes --batch and --max-seq-len, sparse_mla_decode --batch, mxfp4_gemm --tokens.
  --arch host: tunes on this CPU through the LLVM backend instead (host fingerprint, host measurement).
  While another process tunes the same key on this cache (a warmup), it waits for it, then measures anyway.
)";

// A tuning dim and the option that gives its bucket.
struct DimFlag {
  const char* dim;
  const char* flag;
};
constexpr DimFlag kDimFlags[] = {{"batch", "batch"}, {"seq_len", "max-seq-len"}, {"tokens", "tokens"}};

// Exactly the options of the family's tuning dims: a missing one, or one for a dim the family does not tune, is a
// usage error that says which the family takes.
void check_bucket_flags(const FamilyInfo& fam, const Args& args) {
  auto tunes = [&](const DimFlag& d) {
    return std::find(fam.tuning_dims.begin(), fam.tuning_dims.end(), d.dim) != fam.tuning_dims.end();
  };
  std::vector<std::string> wanted;
  for (const DimFlag& d : kDimFlags)
    if (tunes(d)) wanted.push_back(std::string("--") + d.flag);
  const std::string takes = fmt::format("{} tunes {}", fam.name, fmt::join(wanted, " and "));
  for (const DimFlag& d : kDimFlags) {
    const bool tuned = tunes(d);
    if (tuned && !args.has(d.flag)) throw UsageError(fmt::format("--{} is required: {}", d.flag, takes));
    if (!tuned && args.has(d.flag))
      throw UsageError(fmt::format("--{}: {} has no {} bucket ({})", d.flag, fam.name, d.dim, takes));
  }
}

}  // namespace

int cmd_tune(const std::vector<std::string>& argv) {
  for (const auto& a : argv)
    if (a == "--help") return fmt::print("{}", kHelp), 0;
  Args args(argv, {"family", "problem", "config", "batch", "max-seq-len", "tokens", "cache", "arch"},
            {"json", "no-persist"});
  const bool host = args.has("arch") && args.get("arch") == "host";
  if (args.has("arch") && !host)
    throw UsageError("--arch: tune runs on GPU 0 (no --arch) or on the host CPU (--arch host), got '" + args.get("arch") + "'");
  const FamilyInfo& fam = family_option(args);
  if (args.has("problem") && args.has("config")) throw UsageError("give --problem KEY or --config JSON, not both");
  std::string problem;
  if (args.has("problem")) problem = fam.canonical_problem(args.get("problem"));
  else if (args.has("config")) problem = fam.problem_from_json(args.get("config"));
  else throw UsageError("give --problem KEY or --config JSON");
  std::vector<std::pair<std::string, int64_t>> buckets;
  constexpr int kMaxBucket = autotune::kMaxBucketValue;  // rounded up to a power of two, still an int
  if (args.has("batch")) buckets.emplace_back("b", bucket_pow2_ceil(args.get_int("batch", 1, 1, kMaxBucket)));
  if (args.has("max-seq-len"))
    buckets.emplace_back("l", bucket_pow2_ceil(args.get_int("max-seq-len", 1, 1, kMaxBucket)));
  if (args.has("tokens")) buckets.emplace_back("m", bucket_pow2_ceil(args.get_int("tokens", 1, 1, kMaxBucket)));
  check_bucket_flags(fam, args);
  if (!host) {
    if (system_info().devices.empty())
      throw UsageError("tune needs a GPU (use ktune compile to build without one, or --arch host)");
    use_device(0);
  }
  autotune::TuneOptions t;
  t.persist = !args.has("no-persist");
  RuntimeOptions o = offline_runtime_options("tune", args.get("cache"));
  // The table is the result; --no-persist only prints it, so its candidates may compile in memory where nothing
  // can be stored (a read-only cache).
  if (!t.persist) o.require_store = false;
  Runtime rt(o);
  if (t.persist) require_writable_layer(rt, "tune");
  if (host) {
    t.host = true;
    t.measure = autotune::host_measure_options();
  }
  // Measured alone: a warmup (or another tune) measuring the same key on this cache finishes first.
  const autotune::KeyClaim claim = autotune::claim_key(rt, fam.name, tuning_key(problem, buckets), host,
                                                       /*retune=*/true, autotune::kTuningFlightWait_s);
  if (!claim.note.empty()) fmt::print(stderr, "ktune tune: {}\n", claim.note);
  autotune::TuneOutcome r = autotune::tune(rt, fam.name, problem, buckets, t);
  // The candidates' binaries are results too: a later warmup or serving process would compile them again.
  if (const std::string unstored = unstored_results(rt); t.persist && !unstored.empty())
    throw Error(Status::cache_error, "tune", unstored);
  if (args.has("json")) {
    std::vector<std::string> rows;
    for (const auto& c : r.candidates)
      rows.push_back(JsonObject().str("config", c.config).boolean("ok", c.ok).str("error", c.error)
                         .real("median_ms", c.m.median_ms).real("spread", c.m.spread).num("rounds", c.m.rounds).dump());
    fmt::print("{}\n", JsonObject().str("family", r.family).str("key", r.tuning_key).str("winner", r.winner)
                           .str("device", r.device_fingerprint).num("compiled", r.compiled)
                           .real("compile_ms", r.compile_ms).real("measure_ms", r.measure_ms)
                           .raw("candidates", json_array(rows)).dump());
    return 0;
  }
  fmt::print("{} {}\ndevice {}\n", r.family, r.tuning_key, r.device_fingerprint);
  fmt::print("| config | median us | spread | rounds | note |\n|---|---|---|---|---|\n");
  for (const auto& c : r.candidates) {
    if (!c.ok) {
      fmt::print("| {} | - | - | - | failed: {:.80} |\n", c.config, c.error);
      continue;
    }
    fmt::print("| {} | {:.2f} | {:.1f}% | {} | {} |\n", c.config, c.m.median_ms * 1000, c.m.spread * 100, c.m.rounds,
               c.config == r.winner ? "winner" : "");
  }
  fmt::print("compiled {} candidates in {:.0f} ms, measured in {:.0f} ms\n", r.compiled, r.compile_ms, r.measure_ms);
  return 0;
}

}  // namespace ktune::cli
