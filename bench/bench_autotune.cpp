// Autotune quality, on the GPU: for several xqa_decode keys, (1) the tuner's winner vs the best
// config found by exhaustive, heavily sampled measurement of every candidate (bar: within 3%), and (2) five
// independent tunings of the same key pick configs whose times are within noise of each other.
//   bench_autotune --cache FILE [--json OUT]
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "autotune/gpu_timer.hpp"
#include "autotune/measure.hpp"
#include "autotune/tuner.hpp"
#include "autotune/workload.hpp"
#include "driver_api.hpp"
#include "gpu_bench_util.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune/tuning.hpp"

using namespace ktune;
using bench::arg;
using ktune::cache::Json;

namespace {

struct Key {
  std::string problem_json;
  int batch, seq_len;
};

}  // namespace

int main(int argc, char** argv) {
  try {
    use_device(0);
    RuntimeOptions o;
    o.cache_path = arg(argc, argv, "cache", "bench_autotune.db");
    Runtime rt(o);
    const FamilyInfo& fam = family("xqa_decode");
    const std::string llama = R"("head_dim":128,"num_q_heads":32,"num_kv_heads":8,"page_size":32)";
    std::vector<Key> keys = {
        {"{" + llama + "}", 64, 4096},
        {"{" + llama + R"(,"max_q_len":4,"mask":"causal"})", 64, 4096},
        {"{" + llama + R"(,"kv_dtype":"fp8"})", 64, 4096},
        {"{" + llama + "}", 8, 16384},
        {R"({"head_dim":128,"num_q_heads":64,"num_kv_heads":8,"page_size":32})", 4, 131072},
    };
    const auto& cu = detail::driver();
    CUstream stream = nullptr;
    detail::check_cu(cu.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    autotune::GpuTimer timer(stream);
    autotune::MeasureOptions heavy;
    heavy.warmup_iters = 5;
    heavy.samples = 30;
    heavy.iters_per_sample = 10;
    heavy.max_spread = 0.01;

    Json json_rows = Json::array();
    fmt::print("| key | tuned winner | tuned us | exhaustive best | best us | winner/best | 5 tunings: configs | spread of their times |\n");
    fmt::print("|---|---|---|---|---|---|---|---|\n");
    for (const Key& k : keys) {
      std::string pk = fam.problem_from_json(k.problem_json);
      std::vector<std::pair<std::string, int64_t>> buckets = {{"b", bucket_pow2_ceil(k.batch)},
                                                              {"l", bucket_pow2_ceil(k.seq_len)}};
      autotune::TuneOptions t;
      t.persist = false;
      std::vector<std::string> winners;
      std::vector<autotune::TuneOutcome> outcomes;
      for (int rep = 0; rep < 5; ++rep) {
        outcomes.push_back(autotune::tune(rt, fam.name, pk, buckets, t));
        winners.push_back(outcomes.back().winner);
      }
      // Exhaustive: every candidate, heavily sampled, on the same workload.
      auto workload = autotune::workload_factory(fam.name)(rt, pk, buckets);
      std::map<std::string, double> exhaustive;
      for (const auto& c : outcomes[0].candidates) {
        if (!c.ok) continue;
        workload->prepare(c.config);
        auto m = autotune::measure(timer, [&] { workload->launch(c.config, stream); }, heavy);
        exhaustive[c.config] = m.median_ms;
      }
      auto best = std::min_element(exhaustive.begin(), exhaustive.end(),
                                   [](auto& a, auto& b) { return a.second < b.second; });
      double winner_ms = exhaustive[winners[0]];
      double lo = 1e30, hi = 0;
      for (const auto& w : winners) {
        lo = std::min(lo, exhaustive[w]);
        hi = std::max(hi, exhaustive[w]);
      }
      std::string tk = tuning_key(pk, buckets);
      fmt::print("| {} | {} | {:.2f} | {} | {:.2f} | {:.3f} | {} | {:.1f}% |\n", tk, winners[0], winner_ms * 1000,
                 best->first, best->second * 1000, winner_ms / best->second, fmt::join(winners, " "),
                 (hi / lo - 1) * 100);
      Json all_winners = Json::array();
      for (const auto& w : winners) all_winners.push(w);
      json_rows.push(Json::object()
                         .set("key", tk).set("winner", winners[0]).set("winner_us", winner_ms * 1000)
                         .set("best", best->first).set("best_us", best->second * 1000)
                         .set("ratio", winner_ms / best->second).set("winners", std::move(all_winners))
                         .set("winner_spread", hi / lo - 1));
    }
    std::string out = arg(argc, argv, "json", "");
    if (!out.empty()) std::ofstream(out) << Json::object().set("rows", std::move(json_rows)).dump() << "\n";
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_autotune: %s\n", e.what());
    return 1;
  }
}
