// sparse_mla_decode through the runtime on the bench shapes (rows()): TFLOP/s (FLOPs = 2 * tokens * heads * topk *
// (576 + 512)) and gathered KV bytes per second (tokens * topk * row bytes).
//   bench_sparse_mla prepare --cache FILE [--arch sm_90a]   compile every candidate kernel into FILE (no GPU)
//   bench_sparse_mla run [--json OUT] [--reps N] [--rows TEXT] [--own-only]
//                                                           needs a GPU; cache from KTUNE_CACHE. --rows: only the
//                                                           rows whose label contains TEXT; --own-only: only the
//                                                           launch's own config (e.g. under Nsight Compute)
// Per row: the tuning workload (autotune/sparse_mla_workload.cpp: random inputs, random distinct slots per
// token, rotating copies > 2x L2) for b = tokens; every candidate config (the launch's own choice first) is
// loaded, warmed up and timed with CUDA events around each call (decode + combine when split); the median of
// `reps` calls is reported. The run prints the runtime's compile count: 0 after `prepare` filled the cache.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/workload.hpp"
#include "driver_api.hpp"
#include "gpu_bench_util.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/device.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune/sparse_mla_decode.hpp"

using namespace ktune;
using bench::arg;
using ktune::cache::Json;
using namespace ktune::mla;

namespace {

struct Row {
  std::string label;
  int heads, topk, tokens;
  KvFormat fmt;
  double bar_tflops;  // 0 = none (memory-bound rows report bytes/s)
};

const std::vector<Row>& rows() {
  static const std::vector<Row> r = {
      {"h128 k2048 T64 fp8", 128, 2048, 64, KvFormat::Fp8DsMla, 300},
      {"h128 k2048 T128 fp8", 128, 2048, 128, KvFormat::Fp8DsMla, 300},
      {"h128 k2048 T64 bf16", 128, 2048, 64, KvFormat::Bf16, 0},
      {"h128 k2048 T8 fp8", 128, 2048, 8, KvFormat::Fp8DsMla, 0},
      {"h64 k2048 T64 fp8", 64, 2048, 64, KvFormat::Fp8DsMla, 0},
      {"h16 k2048 T64 fp8", 16, 2048, 64, KvFormat::Fp8DsMla, 0},
      {"h16 k2048 T128 fp8", 16, 2048, 128, KvFormat::Fp8DsMla, 0},
  };
  return r;
}

Problem problem_of(const Row& r) {
  Problem p;
  p.num_heads = r.heads;
  p.topk = r.topk;
  p.page_size = 64;
  p.kv_format = r.fmt;
  p.validate();
  return p;
}

// The launch's own choice first, then up to 7 more of the search space.
std::vector<std::string> candidates(const Problem& p, const Arch& arch, const std::string& first) {
  std::vector<std::string> out = {first};
  // the sm_90a wgmma variants first (the S = Q K^T path under test) and, at 16 heads, the eight-warp kernel's
  // best (t32.s1.g16) beside the warp-specialized ones; then the rest of the space
  std::vector<const char*> first_tries = {"t64.s1.g64.w16.wg", "t64.s1.g64.wg", "t32.s2.g64.w16.wg", "t32.s2.g64.wg"};
  if (p.num_heads == 16) first_tries.push_back("t32.s1.g16");
  for (const char* c : first_tries)
    if (can_implement(p, Config::from_key(c), arch, default_limits(arch)).empty() &&
        std::find(out.begin(), out.end(), c) == out.end())
      out.push_back(c);
  for (const Config& c : search_space(p, arch)) {
    if (out.size() >= 9) break;
    if (std::find(out.begin(), out.end(), c.key()) == out.end()) out.push_back(c.key());
  }
  return out;
}

int prepare(const std::string& cache, const Arch& arch) {
  RuntimeOptions o;
  o.cache_path = cache;
  Runtime rt(o);
  std::vector<GeneratedKernel> jobs;
  for (const Row& r : rows()) {
    const Problem p = problem_of(r);
    for (const std::string& c : candidates(p, arch, default_config(p, arch).key()))
      jobs.push_back(generate(p, Config::from_key(c), arch));
    jobs.push_back(generate_shared(p, arch));  // the problem's shared module (compile_all drops repeats)
  }
  return bench::compile_all(rt, jobs, arch, "bench_sparse_mla");
}

struct Measured {
  std::string config, source;
  int splits = 1;
  double us = 0, us_min = 0, tflops = 0, kv_tbs = 0;
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
    Row row;
    Measured chosen, best;
  };
  std::vector<Summary> summary;
  for (const Row& r : rows()) {
    if (r.label.find(only_rows) == std::string::npos) continue;
    const Problem p = problem_of(r);
    const SparseMlaDecodePlan own = sparse_mla_decode_plan(rt, p, r.tokens);
    auto workload = autotune::workload_factory("sparse_mla_decode")(rt, p.key(), {{"b", r.tokens}});
    const double flops = workload->flops_per_call();
    const double kvb = double(r.tokens) * r.topk * p.row_bytes();
    std::vector<Measured> ms;
    std::vector<std::string> configs = candidates(p, arch, own.config);
    if (own_only) configs.resize(1);
    for (const std::string& cfg : configs) {
      Measured m;
      m.config = cfg;
      m.source = cfg == own.config ? own.source : "candidate";
      try {
        m.splits = sparse_mla_decode_plan(rt, p, r.tokens, cfg.c_str()).num_splits;
        workload->prepare(cfg);
        const bench::CallTimes c = bench::time_calls(rt, *workload, cfg, ts.stream, ts.ev, reps, 5);
        m.us = c.median_us;
        m.us_min = c.min_us;
        m.compiles_during = c.compiles;
        m.loads_during = c.loads;
        m.tflops = flops / (m.us * 1e-6) / 1e12;
        m.kv_tbs = kvb / (m.us * 1e-6) / 1e12;
      } catch (const std::exception& e) {
        m.error = e.what();
      }
      fmt::print("  {:<22} {:<11} {:<9} splits {:>2} {:>8.1f} us (min {:>8.1f}) {:>6.1f} TFLOP/s {:>5.2f} TB/s KV"
                 "  compiles/loads while timing {}/{}{}\n",
                 r.label, m.config, m.source, m.splits, m.us, m.us_min, m.tflops, m.kv_tbs, m.compiles_during,
                 m.loads_during, m.error.empty() ? "" : "  ERROR " + m.error);
      std::fflush(stdout);
      ms.push_back(m);
    }
    Summary s{r, ms.front(), ms.front()};
    for (const Measured& m : ms)
      if (m.error.empty() && (s.best.tflops == 0 || m.tflops > s.best.tflops)) s.best = m;
    summary.push_back(s);
    Json cj = Json::array();
    for (const Measured& m : ms)
      cj.push(Json::object()
                  .set("config", m.config).set("source", m.source).set("splits", m.splits).set("median_us", m.us)
                  .set("min_us", m.us_min).set("tflops", m.tflops).set("kv_tbs", m.kv_tbs)
                  .set("compiles_while_timing", m.compiles_during).set("error", m.error.empty() ? "" : "failed"));
    row_json.push(Json::object()
                      .set("label", r.label).set("problem", p.key()).set("heads", r.heads).set("topk", r.topk)
                      .set("tokens", r.tokens).set("flops", flops).set("kv_bytes", kvb).set("bar_tflops", r.bar_tflops)
                      .set("launch_choice", own.config).set("launch_choice_source", own.source)
                      .set("launch_choice_tflops", s.chosen.tflops).set("launch_choice_kv_tbs", s.chosen.kv_tbs)
                      .set("best_config", s.best.config).set("best_tflops", s.best.tflops)
                      .set("best_kv_tbs", s.best.kv_tbs).set("candidates", std::move(cj)));
  }
  const RuntimeStats st = rt.stats();
  fmt::print("\nruntime stats: compiles {} loads {} cache_hits {} memory_hits {} misses {}\n", st.compiles, st.loads,
             st.cache_hits, st.memory_hits, st.misses);
  fmt::print("\n| shape | launch choice | us | TFLOP/s | KV TB/s | best | us | TFLOP/s | KV TB/s | bar |\n"
             "|---|---|---|---|---|---|---|---|---|---|\n");
  for (const Summary& s : summary)
    fmt::print("| {} | {} ({}, s{}) | {:.1f} | {:.1f} | {:.2f} | {} (s{}) | {:.1f} | {:.1f} | {:.2f} | {} |\n",
               s.row.label, s.chosen.config, s.chosen.source, s.chosen.splits, s.chosen.us, s.chosen.tflops,
               s.chosen.kv_tbs, s.best.config, s.best.splits, s.best.us, s.best.tflops, s.best.kv_tbs,
               s.row.bar_tflops > 0 ? fmt::format("{:.0f} TFLOP/s", s.row.bar_tflops) : "-");
  fmt::print("copy {:.2f} TB/s; compiles in this process: {}\n", ts.copy, st.compiles);
  if (!json_out.empty())
    std::ofstream(json_out) << ts.json_header("sparse_mla_decode", arch, reps)
                                   .set("compiles", st.compiles).set("loads", st.loads).set("rows", std::move(row_json))
                                   .dump()
                            << "\n";
  return st.compiles == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_sparse_mla prepare --cache FILE [--arch sm_90a] | run [--json OUT] [--reps N] "
                         "[--rows TEXT] [--own-only]\n");
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "prepare")
      return prepare(arg(argc, argv, "cache", "bench_sparse_mla.db"), Arch::parse(arg(argc, argv, "arch", "sm_90a")));
    if (mode == "run")
      return run(arg(argc, argv, "json", ""), std::max(5, std::stoi(arg(argc, argv, "reps", "50"))),
                 arg(argc, argv, "rows", ""), bench::flag(argc, argv, "own-only"));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_sparse_mla: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "bench_sparse_mla: unknown mode '%s'\n", mode.c_str());
  return 2;
}
