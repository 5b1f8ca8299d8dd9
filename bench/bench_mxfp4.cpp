// mxfp4_gemm through the runtime on the bench shapes (rows(), sm_90a): effective TB/s (packed weight + scales +
// activations + output) for few tokens, TFLOP/s for many.
//   bench_mxfp4 prepare --cache FILE [--arch sm_90a]   compile every candidate kernel into FILE (no GPU needed)
//   bench_mxfp4 run [--json OUT] [--reps N] [--only TEXT]  needs a GPU; cache from KTUNE_CACHE; --only: rows whose
//                                                      label contains TEXT
// Per row: the tuning workload (templates/mxfp4_gemm/workload.cpp: fresh random codes and scales, N(0,1)
// activations, rotating copies > 2x L2; grouped rows routed uniformly at random over the experts, or split
// evenly on the "equal rows" rows, the routing of the torch.bmm peer) for bucket m = tokens;
// the launch's own choice first, then a few alternatives, each warmed up and timed with CUDA events around each
// call; the median of `reps` calls is reported. Runtime stats are checked: 0 compiles and 0 loads while timing.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "autotune/workload.hpp"
#include "driver_api.hpp"
#include "gpu_bench_util.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/device.hpp"
#include "ktune/family.hpp"
#include "ktune/mxfp4_gemm.hpp"
#include "ktune/runtime.hpp"

using namespace ktune;
using bench::arg;
using ktune::cache::Json;
using namespace ktune::mxfp4;

namespace {

struct Row {
  std::string label;
  std::string problem;  // key
  int tokens;           // tuning bucket m (grouped: rows = tokens * top_k)
  std::vector<std::string> extra;
  bool equal_rows = false;  // grouped: every expert gets the same rows (the torch.bmm peer's case), not routed
};

const std::vector<Row>& rows() {
  const std::vector<std::string> small = {"bm8.tn1.wn1.wk4.s8.d8", "bm8.tn2.wn1.wk8.s5.d4", "bm8.tn4.wn1.wk8.s5.d2",
                                          "bm8.tn2.wn1.wk4.s8.d4", "bm8.tn4.wn1.wk4.s8.d2", "bm8.tn2.wn2.wk4.s8.d4",
                                          "bm16.tn1.wn1.wk4.s5.d8", "bm16.tn2.wn1.wk8.s3.d4", "bm16.tn4.wn1.wk8.s3.d2",
                                          "bm16.tn2.wn1.wk4.s5.d4", "bm16.tn4.wn1.wk4.s5.d2", "bm16.tn2.wn2.wk4.s5.d4",
                                          // s0: activations straight from global memory (no CTA barrier)
                                          "bm8.tn2.wn1.wk8.s0.d4", "bm8.tn1.wn1.wk8.s0.d8", "bm8.tn4.wn1.wk8.s0.d2",
                                          "bm8.tn2.wn1.wk4.s0.d4", "bm8.tn2.wn2.wk4.s0.d4", "bm16.tn2.wn1.wk8.s0.d4",
                                          "bm16.tn1.wn1.wk8.s0.d8", "bm16.tn4.wn1.wk8.s0.d2", "bm16.tn2.wn2.wk4.s0.d4",
                                          "bm8.tn2.wn1.wk8.s0.d2", "bm16.tn2.wn1.wk8.s0.d2",
                                          // 16 warps per CTA
                                          "bm8.tn4.wn1.wk16.s0.d2"};
  const std::vector<std::string> big = {"bm128.tn2.wn4.wk1.s4.d2", "bm64.tn2.wn4.wk1.s4.d2", "bm128.tn4.wn2.wk1.s3.d1",
                                        "bm64.tn4.wn2.wk1.s4.d2",
                                        // sm_90a wgmma
                                        "bm256.tn1.wn8.wk1.s4.d4.wg", "bm128.tn1.wn8.wk1.s4.d4.wg",
                                        "bm256.tn1.wn4.wk1.s4.d4.wg", "bm128.tn1.wn4.wk1.s4.d4.wg",
                                        "bm256.tn1.wn8.wk1.s3.d4.wg", "bm128.tn1.wn8.wk1.s6.d4.wg",
                                        "bm256.tn1.wn8.wk1.s4.d8.wg"};
  const std::vector<std::string> moe8 = {"bm16.tn2.wn4.wk1.s8.d4", "bm16.tn2.wn4.wk1.s3.d2", "bm16.tn4.wn2.wk1.s4.d2",
                                         "bm16.tn2.wn4.wk1.s4.d4", "bm16.tn4.wn4.wk1.s3.d2", "bm16.tn2.wn2.wk2.s5.d4",
                                         "bm16.tn4.wn1.wk4.s5.d2", "bm8.tn4.wn2.wk1.s4.d2",
                                         "bm16.tn2.wn4.wk1.s0.d4", "bm16.tn2.wn4.wk1.s0.d2", "bm16.tn2.wn2.wk2.s0.d4",
                                         "bm8.tn2.wn4.wk1.s0.d4"};
  const std::vector<std::string> moe128 = {"bm64.tn2.wn4.wk1.s4.d2", "bm128.tn2.wn4.wk1.s4.d2", "bm64.tn2.wn4.wk1.s6.d2",
                                           "bm32.tn2.wn4.wk1.s6.d2", "bm64.tn1.wn4.wk2.s6.d4",
                                           "bm128.tn1.wn8.wk1.s4.d4.wg", "bm64.tn1.wn8.wk1.s4.d4.wg",
                                           "bm128.tn1.wn4.wk1.s4.d4.wg", "bm64.tn1.wn4.wk1.s4.d4.wg",
                                           "bm256.tn1.wn8.wk1.s4.d4.wg", "bm256.tn1.wn4.wk1.s4.d4.wg",
                                           "bm128.tn1.wn4.wk4.s3.d4.wg", "bm128.tn1.wn4.wk2.s4.d4.wg",
                                           "bm256.tn1.wn4.wk2.s3.d4.wg", "bm192.tn1.wn4.wk1.s3.d4.wg",
                                           // weight ring depths
                                           "bm128.tn1.wn8.wk1.s4.d8.wg", "bm128.tn1.wn8.wk1.s4.d2.wg"};
  // 17..1023 rows (chunked prefill): the mma.sync tiles against the wgmma ones.
  const std::vector<std::string> mid = {"bm64.tn2.wn4.wk1.s4.d2", "bm128.tn2.wn4.wk1.s4.d2", "bm32.tn1.wn4.wk2.s6.d4",
                                        "bm64.tn1.wn4.wk2.s6.d4", "bm64.tn4.wn2.wk1.s4.d2",
                                        "bm64.tn1.wn4.wk1.s4.d4.wg", "bm64.tn1.wn8.wk1.s4.d4.wg",
                                        "bm128.tn1.wn4.wk1.s4.d4.wg", "bm128.tn1.wn8.wk1.s4.d4.wg",
                                        "bm256.tn1.wn4.wk1.s4.d4.wg", "bm256.tn1.wn8.wk1.s4.d4.wg",
                                        // warpgroups splitting K
                                        "bm64.tn1.wn4.wk4.s4.d4.wg", "bm64.tn1.wn4.wk2.s4.d4.wg",
                                        "bm128.tn1.wn4.wk4.s3.d4.wg", "bm128.tn1.wn4.wk2.s4.d4.wg",
                                        "bm256.tn1.wn4.wk2.s3.d4.wg", "bm32.tn1.wn4.wk4.s4.d4.wg",
                                        "bm32.tn1.wn4.wk2.s4.d4.wg", "bm32.tn1.wn4.wk1.s4.d4.wg"};
  // 1..4 rows per expert (decode batches of 32..128 tokens): the search space's bm8 / bm16 grouped tiles.
  const std::vector<std::string> moe1 = {"bm8.tn2.wn4.wk1.s4.d4", "bm16.tn2.wn4.wk1.s3.d2", "bm8.tn2.wn4.wk1.s8.d4",
                                         "bm8.tn1.wn4.wk2.s8.d8", "bm8.tn2.wn4.wk1.s0.d4", "bm8.tn2.wn4.wk1.s0.d2",
                                         "bm8.tn4.wn2.wk1.s4.d2", "bm16.tn2.wn4.wk1.s4.d4", "bm8.tn4.wn2.wk1.s0.d2"};
  const std::vector<std::string> moe32 = {"bm32.tn1.wn4.wk2.s6.d4", "bm64.tn1.wn4.wk2.s6.d4", "bm64.tn2.wn4.wk1.s4.d2",
                                          "bm32.tn2.wn4.wk1.s6.d2", "bm64.tn1.wn4.wk1.s4.d4.wg",
                                          "bm64.tn1.wn8.wk1.s4.d4.wg", "bm128.tn1.wn4.wk1.s4.d4.wg",
                                          "bm64.tn1.wn4.wk4.s4.d4.wg", "bm64.tn1.wn4.wk2.s4.d4.wg",
                                          "bm128.tn1.wn4.wk4.s3.d4.wg", "bm128.tn1.wn4.wk2.s4.d4.wg",
                                          "bm32.tn1.wn4.wk1.s4.d4.wg", "bm32.tn1.wn8.wk1.s4.d4.wg",
                                          "bm32.tn1.wn4.wk2.s4.d4.wg"};
  const std::vector<std::string> moe256 = {"bm128.tn1.wn4.wk1.s4.d4.wg", "bm128.tn1.wn8.wk1.s4.d4.wg",
                                           "bm256.tn1.wn4.wk1.s4.d4.wg", "bm256.tn1.wn8.wk1.s4.d4.wg",
                                           "bm64.tn1.wn4.wk1.s4.d4.wg", "bm128.tn2.wn4.wk1.s4.d2",
                                           "bm256.tn1.wn4.wk2.s3.d4.wg", "bm128.tn1.wn4.wk4.s3.d4.wg"};
  // FP16 activations, many rows: mma.sync tiles with at most 128 accumulators (FP16 doubles them), and the
  // 16-row ring tile that was the default here before.
  const std::vector<std::string> fp16_big = {"bm16.tn1.wn4.wk1.s3.d2", "bm64.tn2.wn4.wk1.s4.d2", "bm64.tn2.wn2.wk1.s4.d2",
                                             "bm64.tn1.wn4.wk2.s6.d4", "bm32.tn2.wn4.wk1.s6.d2", "bm32.tn1.wn4.wk2.s6.d4"};
  const std::vector<std::string> equal = {"bm64.tn1.wn4.wk1.s4.d4.wg", "bm128.tn1.wn8.wk1.s4.d4.wg",
                                          "bm192.tn1.wn4.wk1.s3.d4.wg"};
  static const std::vector<Row> r = {
      {"dense 8192x8192 M=1", "n8192.k8192.bf16-bf16", 1, small},
      {"dense 8192x8192 M=16", "n8192.k8192.bf16-bf16", 16, small},
      {"dense 8192x8192 M=32", "n8192.k8192.bf16-bf16", 32, mid},
      {"dense 8192x8192 M=64", "n8192.k8192.bf16-bf16", 64, mid},
      {"dense 8192x8192 M=128", "n8192.k8192.bf16-bf16", 128, mid},
      {"dense 8192x8192 M=256", "n8192.k8192.bf16-bf16", 256, mid},
      {"dense 8192x8192 M=512", "n8192.k8192.bf16-bf16", 512, mid},
      {"dense 8192x8192 M=4096", "n8192.k8192.bf16-bf16", 4096, big},
      {"dense 8192x8192 fp16 M=4096", "n8192.k8192.fp16-fp16", 4096, fp16_big},
      {"moe gate_up 5760x2880 E128 1 tok/exp", "n5760.k2880.e128.top4.bf16-bf16", 32, moe1},
      {"moe down 2880x2880 E128 1 tok/exp", "n2880.k2880.e128.top4.bf16-bf16", 32, moe1},
      {"moe gate_up 5760x2880 E128 4 tok/exp", "n5760.k2880.e128.top4.bf16-bf16", 128, moe1},
      {"moe down 2880x2880 E128 4 tok/exp", "n2880.k2880.e128.top4.bf16-bf16", 128, moe1},
      {"moe gate_up 5760x2880 E128 8 tok/exp", "n5760.k2880.e128.top4.bf16-bf16", 256, moe8},
      {"moe down 2880x2880 E128 8 tok/exp", "n2880.k2880.e128.top4.bf16-bf16", 256, moe8},
      {"moe gate_up 5760x2880 E128 32 tok/exp", "n5760.k2880.e128.top4.bf16-bf16", 1024, moe32},
      {"moe down 2880x2880 E128 32 tok/exp", "n2880.k2880.e128.top4.bf16-bf16", 1024, moe32},
      {"moe gate_up 5760x2880 E128 64 tok/exp", "n5760.k2880.e128.top4.bf16-bf16", 2048, moe32},
      {"moe down 2880x2880 E128 64 tok/exp", "n2880.k2880.e128.top4.bf16-bf16", 2048, moe32},
      {"moe gate_up 5760x2880 E128 128 tok/exp", "n5760.k2880.e128.top4.bf16-bf16", 4096, moe128},
      {"moe down 2880x2880 E128 128 tok/exp", "n2880.k2880.e128.top4.bf16-bf16", 4096, moe128},
      {"moe gate_up 5760x2880 E128 256 tok/exp", "n5760.k2880.e128.top4.bf16-bf16", 8192, moe256},
      {"moe down 2880x2880 E128 256 tok/exp", "n2880.k2880.e128.top4.bf16-bf16", 8192, moe256},
      // the peer's routing: equal rows per expert (the launch's own choice and the tile sizes next to it)
      {"moe gate_up 5760x2880 E128 32 tok/exp, equal rows", "n5760.k2880.e128.top4.bf16-bf16", 1024, equal, true},
      {"moe down 2880x2880 E128 32 tok/exp, equal rows", "n2880.k2880.e128.top4.bf16-bf16", 1024, equal, true},
      {"moe gate_up 5760x2880 E128 64 tok/exp, equal rows", "n5760.k2880.e128.top4.bf16-bf16", 2048, equal, true},
      {"moe down 2880x2880 E128 64 tok/exp, equal rows", "n2880.k2880.e128.top4.bf16-bf16", 2048, equal, true},
      {"moe gate_up 5760x2880 E128 128 tok/exp, equal rows", "n5760.k2880.e128.top4.bf16-bf16", 4096, equal, true},
      {"moe down 2880x2880 E128 128 tok/exp, equal rows", "n2880.k2880.e128.top4.bf16-bf16", 4096, equal, true},
  };
  return r;
}

int64_t rows_of(const Problem& p, int tokens) { return int64_t(tokens) * (p.grouped() ? p.top_k : 1); }

std::vector<std::string> candidates(const Problem& p, const Row& r, const Arch& arch, const std::string& first) {
  std::vector<std::string> out = {first};
  for (const std::string& c : r.extra)
    if (std::find(out.begin(), out.end(), c) == out.end() &&
        can_implement(p, Config::from_key(c), arch, default_limits(arch)).empty())
      out.push_back(c);
  return out;
}

std::string own_config(const Problem& p, const Row& r, const Arch& arch) {
  const int64_t bucket = mxfp4_gemm_bucket(p, rows_of(p, r.tokens));
  const int64_t m = p.grouped() ? (bucket * p.top_k + p.num_experts - 1) / p.num_experts : bucket;
  return default_config(p, arch, m).key();
}

int prepare(const std::string& cache, const Arch& arch) {
  RuntimeOptions o;
  o.cache_path = cache;
  Runtime rt(o);
  std::vector<GeneratedKernel> jobs;
  for (const Row& r : rows()) {
    const Problem p = Problem::from_key(r.problem);
    for (const std::string& c : candidates(p, r, arch, own_config(p, r, arch)))
      jobs.push_back(generate(p, Config::from_key(c), arch));
  }
  return bench::compile_all(rt, jobs, arch, "bench_mxfp4");
}

struct Measured {
  std::string config, source;
  double us = 0, us_min = 0, tbs = 0, tflops = 0;
  double b2b_us = 0, b2b_tbs = 0;  // back-to-back: kBatch calls between one event pair, per call
  int64_t compiles = 0, loads = 0;
  std::string error;
};

int run(const std::string& json_out, int reps, const std::string& only) {
  use_device(0);
  Runtime rt(RuntimeOptions::from_env());
  const Arch arch = rt.current_arch();
  const bench::TimingSession ts(arch, reps);
  std::vector<std::string> table;
  Json row_json = Json::array();
  int64_t timing_compiles = 0;
  for (const Row& r : rows()) {
    if (!only.empty() && r.label.find(only) == std::string::npos) continue;
    const Problem p = Problem::from_key(r.problem);
    const int64_t m = rows_of(p, r.tokens);
    const Mxfp4GemmPlan own = mxfp4_gemm_plan(rt, p, m);
    std::unique_ptr<autotune::Workload> w;
    try {
      w = autotune::workload_factory("mxfp4_gemm")(rt, p.key(), {{"m", r.tokens}, {"equal_rows", r.equal_rows}});
    } catch (const std::exception& e) {
      fmt::print("  {}: workload failed: {}\n", r.label, e.what());
      continue;
    }
    std::vector<Measured> ms;
    for (const std::string& cfg : candidates(p, r, arch, own.config)) {
      Measured x;
      x.config = cfg;
      x.source = cfg == own.config ? own.source : "candidate";
      try {
        w->prepare(cfg);
        const int64_t compiles_before = rt.stats().compiles;
        const bench::CallTimes c = bench::time_calls(rt, *w, cfg, ts.stream, ts.ev, reps, 3);
        x.us = c.median_us;
        x.us_min = c.min_us;
        x.compiles = c.compiles;
        x.loads = c.loads;
        x.tbs = w->bytes_per_call() / (x.us * 1e-6) / 1e12;
        x.tflops = w->flops_per_call() / (x.us * 1e-6) / 1e12;
        // Back-to-back: how an engine issues a decode step (launches queued ahead, or a CUDA graph), so launch
        // gaps overlap the previous kernel; inputs still rotate per call. Median over reps / kBatch batches.
        constexpr int kBatch = 20;
        const int batches = std::max(3, reps / 4);
        std::vector<double> tb(batches);
        for (int i = 0; i < batches; ++i) {
          bench::ck(bench::cu().cuEventRecord(ts.ev[0], ts.stream), "cuEventRecord");
          for (int j = 0; j < kBatch; ++j) w->launch(cfg, ts.stream);
          bench::ck(bench::cu().cuEventRecord(ts.ev[1], ts.stream), "cuEventRecord");
          bench::ck(bench::cu().cuEventSynchronize(ts.ev[1]), "back-to-back calls");
          float v = 0;
          bench::ck(bench::cu().cuEventElapsedTime(&v, ts.ev[0], ts.ev[1]), "cuEventElapsedTime");
          tb[i] = v * 1e3 / kBatch;
        }
        std::sort(tb.begin(), tb.end());
        x.b2b_us = tb[tb.size() / 2];
        x.b2b_tbs = w->bytes_per_call() / (x.b2b_us * 1e-6) / 1e12;
        x.compiles = rt.stats().compiles - compiles_before;  // the timed and the back-to-back calls
      } catch (const std::exception& e) {
        x.error = e.what();
      }
      timing_compiles += x.compiles;
      fmt::print("  {:<40} {:<24} {:<9} {:>9.1f} us (min {:>8.1f}) {:>6.3f} TB/s {:>7.1f} TFLOP/s | back-to-back "
                 "{:>8.1f} us {:>6.3f} TB/s | compiles/loads while timing {}/{}{}\n",
                 r.label, x.config, x.source, x.us, x.us_min, x.tbs, x.tflops, x.b2b_us, x.b2b_tbs, x.compiles, x.loads,
                 x.error.empty() ? "" : "  ERROR " + x.error);
      std::fflush(stdout);
      ms.push_back(x);
    }
    Measured best = ms.front();
    for (const Measured& x : ms)
      if (x.error.empty() && (best.us == 0 || !best.error.empty() || x.us < best.us)) best = x;
    Measured best_b2b = ms.front();
    for (const Measured& x : ms)
      if (x.error.empty() && (best_b2b.b2b_us == 0 || !best_b2b.error.empty() || x.b2b_us < best_b2b.b2b_us)) best_b2b = x;
    Json cj = Json::array();
    for (const Measured& x : ms)
      cj.push(Json::object()
                  .set("config", x.config).set("source", x.source).set("median_us", x.us).set("min_us", x.us_min)
                  .set("tbs", x.tbs).set("tflops", x.tflops).set("b2b_us", x.b2b_us).set("b2b_tbs", x.b2b_tbs)
                  .set("compiles_while_timing", x.compiles).set("error", x.error.empty() ? "" : "failed"));
    row_json.push(Json::object()
                      .set("label", r.label).set("problem", p.key()).set("tokens", r.tokens).set("rows", m)
                      .set("bytes", w->bytes_per_call()).set("flops", w->flops_per_call())
                      .set("launch_choice", own.config).set("launch_choice_source", own.source)
                      .set("best_config", best.config).set("best_us", best.us).set("best_tbs", best.tbs)
                      .set("best_tflops", best.tflops).set("launch_choice_us", ms.front().us)
                      .set("best_b2b_config", best_b2b.config).set("best_b2b_us", best_b2b.b2b_us)
                      .set("best_b2b_tbs", best_b2b.b2b_tbs).set("launch_choice_b2b_us", ms.front().b2b_us)
                      .set("candidates", std::move(cj)));
    table.push_back(fmt::format("| {} | {} ({}) | {:.1f} | {:.2f} | {:.1f} | {} | {:.1f} | {:.2f} | {:.1f} |", r.label,
                                own.config, own.source, ms.front().us, ms.front().tbs, ms.front().tflops, best.config,
                                best.us, best.tbs, best.tflops));
  }
  const RuntimeStats s = rt.stats();
  fmt::print("\nruntime stats: memory_hits {} cache_hits {} misses {} compiles {} loads {} tuning_misses {}\n",
             s.memory_hits, s.cache_hits, s.misses, s.compiles, s.loads, s.tuning_misses);
  fmt::print("\n| shape | launch choice | us | TB/s | TFLOP/s | best | us | TB/s | TFLOP/s |\n|---|---|---|---|---|---|---|---|---|\n");
  for (const auto& t : table) fmt::print("{}\n", t);
  fmt::print("copy {:.2f} TB/s; compiles while timing: {}; total compiles this run: {}\n", ts.copy, timing_compiles,
             s.compiles);
  if (!json_out.empty())
    std::ofstream(json_out) << ts.json_header("mxfp4_gemm", arch, reps)
                                   .set("compiles", s.compiles).set("cache_hits", s.cache_hits)
                                   .set("rows", std::move(row_json))
                                   .dump()
                            << "\n";
  return timing_compiles == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_mxfp4 prepare --cache FILE [--arch sm_90a] | run [--json OUT] [--reps N] [--only TEXT]\n");
    return 2;
  }
  const std::string mode = argv[1];
  try {
    if (mode == "prepare") return prepare(arg(argc, argv, "cache", "bench_mxfp4.db"), Arch::parse(arg(argc, argv, "arch", "sm_90a")));
    if (mode == "run")
      return run(arg(argc, argv, "json", ""), std::max(5, std::stoi(arg(argc, argv, "reps", "50"))),
                 arg(argc, argv, "only", ""));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_mxfp4: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "bench_mxfp4: unknown mode '%s'\n", mode.c_str());
  return 2;
}
