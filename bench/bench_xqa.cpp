// xqa_decode through the runtime on the bench shapes (rows()): effective KV bytes read per second.
//   bench_xqa prepare --cache FILE [--arch sm_90a]   compile every candidate kernel into FILE (no GPU needed)
//   bench_xqa run [--json OUT] [--reps N] [--rows TEXT] [--own-only]
//                                                    needs a GPU; cache from KTUNE_CACHE; only the rows whose
//                                                    label contains TEXT; --own-only: only the launch's choice
// Per row: the tuning workload (autotune/xqa_workload.cpp: random inputs, shuffled block tables, rotating
// copies > 2x L2) for b = batch, l = seq_len; every candidate config (the launch's own choice first, then a few
// measured alternatives) is loaded, warmed up, then timed with CUDA events around each call (decode + combine
// when split); the median of `reps` calls is reported. Runtime stats are checked: 0 compiles and 0 loads
// while timing. A device-to-device copy gives the bandwidth ceiling of this run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/workload.hpp"
#include "common/dtype.h"
#include "driver_api.hpp"
#include "gpu_bench_util.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/device.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune/xqa_decode.hpp"

using namespace ktune;
using bench::arg;
using ktune::cache::Json;
using namespace ktune::xqa;
namespace kc = ::ktune_common;

namespace {

struct Row {
  std::string label;
  std::string problem;  // JSON fields (family problem_from_json)
  int batch, seq_len;
  double bar;  // TB/s target (0 = none)
  std::vector<std::string> extra_configs;
};

const std::vector<Row>& rows() {
  const std::string base = R"("head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32,"layout":"hnd")";
  const std::string big = R"("head_dim":128,"num_q_heads":64,"num_kv_heads":8,"page_size":32,"layout":"hnd")";
  const std::vector<std::string> bf = {"t32.s2.w2", "t32.s3.w2", "t32.s4.w2", "t64.s3.w4"};
  const std::vector<std::string> f8 = {"t64.s3.w2", "t64.s4.w2", "t32.s6.w2", "t128.s2.w4", "t64.s3.w4"};
  const std::vector<std::string> lg = {"t64.s2.w4", "t64.s3.w4", "t32.s3.w2", "t32.s4.w2"};
  const std::vector<std::string> q16 = {"t32.s2.w2",    "t32.s2.w4.wg", "t32.s3.w4.wg", "t32.s4.w4.wg", "t64.s2.w4.wg",
                                        "t64.s3.w4.wg", "t32.s3.w4",    "t64.s3.w4"};
  const std::vector<std::string> rows128 = {"t32.s2.w8.wg",    "t64.s2.w8.wg", "t32.s3.w8.wg", "t32.s2.w4.m4.wg",
                                            "t64.s2.w4.m4.wg", "t32.s3.w4",    "t64.s3.w8"};
  // Bars: the open targets (docs/xqa_decode.md): spec decode q2..q16 >= 4.0 TB/s, FP8 KV >= 4.2 TB/s.
  static const std::vector<Row> r = {
      {"B64 L4096 bf16 q1", "{" + base + R"(,"max_q_len":1,"mask":"none"})", 64, 4096, 4.0, bf},
      {"B64 L4096 bf16 q2 causal", "{" + base + R"(,"max_q_len":2,"mask":"causal"})", 64, 4096, 4.0, bf},
      {"B64 L4096 bf16 q4 causal", "{" + base + R"(,"max_q_len":4,"mask":"causal"})", 64, 4096, 4.0, bf},
      {"B64 L4096 bf16 q8 causal", "{" + base + R"(,"max_q_len":8,"mask":"causal"})", 64, 4096, 4.0, bf},
      {"B64 L4096 bf16 q16 causal", "{" + base + R"(,"max_q_len":16,"mask":"causal"})", 64, 4096, 4.0, q16},
      {"B64 L4096 64/8 bf16 q8 causal", "{" + big + R"(,"max_q_len":8,"mask":"causal"})", 64, 4096, 4.0, q16},
      {"B64 L4096 64/8 bf16 q16 causal", "{" + big + R"(,"max_q_len":16,"mask":"causal"})", 64, 4096, 4.0, rows128},
      {"B64 L4096 fp8 q1", "{" + base + R"(,"kv_dtype":"fp8","max_q_len":1,"mask":"none"})", 64, 4096, 4.2, f8},
      {"B64 L4096 fp8 q4 causal", "{" + base + R"(,"kv_dtype":"fp8","max_q_len":4,"mask":"causal"})", 64, 4096, 4.2,
       f8},
      {"B1 L128K 64/8 bf16 q1", "{" + big + R"(,"max_q_len":1,"mask":"none"})", 1, 131072, 3.7, lg},
      {"B4 L128K 64/8 bf16 q1", "{" + big + R"(,"max_q_len":1,"mask":"none"})", 4, 131072, 4.0, lg},
  };
  return r;
}

// The configs measured for a row: the launch's own choice for `arch` first, then the extras it can run.
std::vector<std::string> candidates(const Problem& p, const Row& r, const Arch& arch, const std::string& first) {
  std::vector<std::string> out = {first};
  for (const std::string& c : r.extra_configs)
    if (std::find(out.begin(), out.end(), c) == out.end() &&
        can_implement(p, Config::from_key(c), arch, default_limits(arch)).empty())
      out.push_back(c);
  return out;
}

Problem problem_of(const Row& r) { return Problem::from_key(family("xqa_decode").problem_from_json(r.problem)); }

double kv_bytes(const Problem& p, const Row& r) {
  return double(r.batch) * r.seq_len * 2.0 * p.num_kv_heads * p.head_dim * kc::dtype_size(int(p.kv_dtype));
}

// Every candidate kernel of every row, compiled into `cache` (bench::compile_all).
int prepare(const std::string& cache, const Arch& arch) {
  RuntimeOptions o;
  o.cache_path = cache;
  Runtime rt(o);
  std::vector<GeneratedKernel> jobs;
  for (const Row& r : rows()) {
    const Problem p = problem_of(r);
    for (const std::string& c : candidates(p, r, arch, default_config(p, arch).key()))
      jobs.push_back(generate(p, Config::from_key(c), arch));
    jobs.push_back(generate_shared(p, arch));  // the problem's shared module (compile_all drops repeats)
  }
  return bench::compile_all(rt, jobs, arch, "bench_xqa");
}

Json stats_json(const RuntimeStats& s) {
  return Json::object()
      .set("memory_hits", s.memory_hits).set("cache_hits", s.cache_hits).set("misses", s.misses)
      .set("compiles", s.compiles).set("loads", s.loads).set("tuning_misses", s.tuning_misses)
      .set("compile_ms", s.compile_ms).set("load_ms", s.load_ms);
}

std::string stats_line(const RuntimeStats& s) {
  return fmt::format("memory_hits {} cache_hits {} misses {} compiles {} loads {} tuning_misses {} compile_ms {:.0f} "
                     "load_ms {:.1f}",
                     s.memory_hits, s.cache_hits, s.misses, s.compiles, s.loads, s.tuning_misses, s.compile_ms,
                     s.load_ms);
}

struct Measured {
  std::string config, source;
  int splits = 1;
  double us = 0, tbs = 0, us_min = 0;
  int64_t compiles_during = 0, loads_during = 0;
  std::string error;
};

int run(const std::string& json_out, int reps, const std::string& only_rows, bool own_only) {
  use_device(0);
  Runtime rt(RuntimeOptions::from_env());
  const Arch arch = rt.current_arch();
  const bench::TimingSession ts(arch, reps);

  Json row_json = Json::array();
  struct Summary {
    std::string label;
    Measured chosen, best;
    double bar;
  };
  std::vector<Summary> summary;
  for (const Row& r : rows()) {
    if (r.label.find(only_rows) == std::string::npos) continue;
    const Problem p = problem_of(r);
    const double kvb = kv_bytes(p, r);
    const XqaDecodePlan own = xqa_decode_plan(rt, p, r.batch, r.seq_len);
    auto workload = autotune::workload_factory("xqa_decode")(rt, p.key(), {{"b", r.batch}, {"l", r.seq_len}});
    std::vector<Measured> ms;
    std::vector<std::string> configs = candidates(p, r, arch, own.config);
    if (own_only) configs.resize(1);
    for (const std::string& cfg : configs) {
      Measured m;
      m.config = cfg;
      m.source = cfg == own.config ? own.source : "candidate";
      try {
        m.splits = xqa_decode_plan(rt, p, r.batch, r.seq_len, cfg.c_str()).num_splits;
        workload->prepare(cfg);  // loads the module (from the cache) + one call
        const bench::CallTimes c = bench::time_calls(rt, *workload, cfg, ts.stream, ts.ev, reps, 5);
        m.us = c.median_us;
        m.us_min = c.min_us;
        m.compiles_during = c.compiles;
        m.loads_during = c.loads;
        m.tbs = kvb / (m.us * 1e-6) / 1e12;
      } catch (const std::exception& e) {
        m.error = e.what();
      }
      fmt::print("  {:<26} {:<11} {:<9} splits {:>3} {:>9.1f} us (min {:>8.1f}) {:>6.3f} TB/s  compiles/loads while "
                 "timing {}/{}{}\n",
                 r.label, m.config, m.source, m.splits, m.us, m.us_min, m.tbs, m.compiles_during, m.loads_during,
                 m.error.empty() ? "" : "  ERROR " + m.error);
      std::fflush(stdout);
      ms.push_back(m);
    }
    Summary s{r.label, ms.front(), ms.front(), r.bar};
    for (const Measured& m : ms)
      if (m.error.empty() && (s.best.tbs == 0 || m.tbs > s.best.tbs)) s.best = m;
    summary.push_back(s);
    Json cj = Json::array();
    for (const Measured& m : ms)
      cj.push(Json::object()
                  .set("config", m.config).set("source", m.source).set("splits", m.splits).set("median_us", m.us)
                  .set("min_us", m.us_min).set("kv_tbs", m.tbs).set("compiles_while_timing", m.compiles_during)
                  .set("loads_while_timing", m.loads_during).set("error", m.error.empty() ? "" : "failed"));
    row_json.push(Json::object()
                      .set("label", r.label).set("problem", p.key()).set("batch", r.batch).set("seq_len", r.seq_len)
                      .set("q_len", p.max_q_len).set("kv_bytes", kvb).set("bar_tbs", r.bar)
                      .set("launch_choice", own.config).set("launch_choice_source", own.source)
                      .set("best_config", s.best.config).set("best_kv_tbs", s.best.tbs)
                      .set("launch_choice_kv_tbs", s.chosen.tbs).set("candidates", std::move(cj)));
  }
  const RuntimeStats final_stats = rt.stats();
  fmt::print("\nruntime stats: {}\n", stats_line(final_stats));
  fmt::print("\n| shape | launch choice | splits | us | TB/s | best config | splits | us | TB/s | bar | copy |\n"
             "|---|---|---|---|---|---|---|---|---|---|---|\n");
  int64_t timing_compiles = 0, timing_loads = 0;
  for (const Summary& s : summary) {
    fmt::print("| {} | {} ({}) | {} | {:.1f} | {:.2f} | {} | {} | {:.1f} | {:.2f} | {} | {:.2f} |\n", s.label,
               s.chosen.config, s.chosen.source, s.chosen.splits, s.chosen.us, s.chosen.tbs, s.best.config,
               s.best.splits, s.best.us, s.best.tbs, s.bar > 0 ? fmt::format("{:.1f}", s.bar) : "-", ts.copy);
  }
  for (const Summary& s : summary) timing_compiles += s.chosen.compiles_during + s.best.compiles_during;
  for (const Summary& s : summary) timing_loads += s.chosen.loads_during + s.best.loads_during;
  fmt::print("compiles while timing: {}, loads while timing: {}\n", timing_compiles, timing_loads);
  if (!json_out.empty()) {
    std::ofstream(json_out) << ts.json_header("xqa_decode", arch, reps)
                                   .set("stats", stats_json(final_stats)).set("rows", std::move(row_json))
                                   .dump()
                            << "\n";
  }
  return timing_compiles == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_xqa prepare --cache FILE [--arch sm_90a] | run [--json OUT] [--reps N] "
                         "[--rows TEXT] [--own-only]\n");
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "prepare") return prepare(arg(argc, argv, "cache", "bench_xqa.db"), Arch::parse(arg(argc, argv, "arch", "sm_90a")));
    if (mode == "run")
      return run(arg(argc, argv, "json", ""), std::max(5, std::stoi(arg(argc, argv, "reps", "60"))),
                 arg(argc, argv, "rows", ""), bench::flag(argc, argv, "own-only"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_xqa: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "bench_xqa: unknown mode '%s'\n", mode.c_str());
  return 2;
}
