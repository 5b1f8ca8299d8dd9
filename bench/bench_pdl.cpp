// Programmatic dependent launch in a CUDA graph of consecutive decode calls, as an engine's decode step runs
// them (one attention call per layer): GPU time per call of a graph of `--chain` xqa_decode calls, each reading
// the previous call's output as its q, captured once with the op's launches plain and once with
// op.set_pdl(true). With PDL a call's CTAs may be scheduled while the call before it drains, so the prologue
// (launch, Q and page-table loads) overlaps the previous tail; the GPU time per call is what it saves.
//   bench_pdl [--chain 32] [--replays 50] [--reps 7] [--json OUT]   (needs a GPU; compiles on first use)
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpu_bench_util.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "ktune/runtime.hpp"
#include "ktune/xqa_decode.hpp"

using namespace ktune;
using namespace ktune::bench;

namespace {

struct Shape {
  int batch, seq_len;
};

struct Row {
  Shape shape;
  std::string config;
  int splits = 1, kernels = 0;
  double plain_us = 0, pdl_us = 0;
};

// Median over `reps` of the GPU time per call of one replay of `exec` (which holds `calls` calls).
double graph_us(CUgraphExec exec, CUstream s, int calls, int replays, int reps) {
  CUevent e0, e1;
  ck(cu().cuEventCreate(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
  ck(cu().cuEventCreate(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
  ck(cu().cuGraphLaunch(exec, s), "warm-up replay");
  std::vector<double> per;
  for (int r = 0; r < reps; ++r) {
    ck(cu().cuEventRecord(e0, s), "cuEventRecord");
    for (int i = 0; i < replays; ++i) ck(cu().cuGraphLaunch(exec, s), "cuGraphLaunch");
    ck(cu().cuEventRecord(e1, s), "cuEventRecord");
    ck(cu().cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    ck(cu().cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    per.push_back(1000.0 * ms / (double(replays) * calls));
  }
  cu().cuEventDestroy(e0);
  cu().cuEventDestroy(e1);
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

CUgraphExec capture(CUstream s, const std::function<void()>& calls) {
  CUgraph graph = nullptr;
  ck(cu().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), "begin capture");
  calls();
  ck(cu().cuStreamEndCapture(s, &graph), "end capture");
  CUgraphExec exec = nullptr;
  ck(cu().cuGraphInstantiateWithFlags(&exec, graph, 0), "cuGraphInstantiate");
  cu().cuGraphDestroy(graph);
  return exec;
}

// Llama-3.1-8B decode attention (32 q heads, 8 kv heads, d128, page 32, bf16), every request at `seq_len`.
Row measure(Runtime& rt, CUstream s, const Shape& sh, int chain, int replays, int reps) {
  xqa::Problem p;
  p.mask = xqa::MaskKind::None;
  const int pages_per_req = (sh.seq_len + p.page_size - 1) / p.page_size, pages = sh.batch * pages_per_req;
  const size_t page_bytes = size_t(2) * p.num_kv_heads * p.page_size * p.head_dim * 2;
  const size_t act_bytes = size_t(sh.batch) * p.num_q_heads * p.head_dim * 2;
  CUdeviceptr kv = alloc(pages * page_bytes, 0x3c);
  std::vector<CUdeviceptr> acts;  // q of call 0, then the output of each call (= the q of the next)
  for (int i = 0; i <= chain; ++i) acts.push_back(alloc(act_bytes, 0x3c));
  std::vector<int> bt(pages), sl(sh.batch, sh.seq_len);
  for (int i = 0; i < pages; ++i) bt[i] = i;
  CUdeviceptr d_bt = alloc(bt.size() * 4, 0), d_sl = alloc(sl.size() * 4, 0);
  ck(cu().cuMemcpyHtoD(d_bt, bt.data(), bt.size() * 4), "upload");
  ck(cu().cuMemcpyHtoD(d_sl, sl.data(), sl.size() * 4), "upload");
  XqaDecodeArgs a;
  a.kv_cache = ptr<void>(kv), a.block_tables = ptr<int32_t>(d_bt), a.seq_lens = ptr<int32_t>(d_sl);
  a.batch = sh.batch, a.num_tokens = sh.batch, a.max_pages_per_req = pages_per_req, a.num_pages = pages;
  a.max_seq_len = sh.seq_len, a.softmax_scale = 0.088f;
  XqaDecodeOp plain = xqa::prepare(rt, p), pdl = xqa::prepare(rt, p);
  pdl.set_pdl(true);
  const XqaDecodePlan plan = plain.plan(a);
  CUdeviceptr ws = alloc(std::max<size_t>(plan.workspace_bytes, 16), 0);
  a.workspace = ptr<void>(ws), a.workspace_bytes = plan.workspace_bytes;
  auto calls = [&](const XqaDecodeOp& op) {
    for (int i = 0; i < chain; ++i) {
      a.q = ptr<void>(acts[i]);
      a.out = ptr<void>(acts[i + 1]);
      op.run(a, s);
    }
  };
  calls(plain);  // loads the module outside the capture
  ck(cu().cuStreamSynchronize(s), "sync");
  Row row{sh, plan.config, plan.num_splits, plan.num_splits > 1 ? 2 : 1};
  CUgraphExec g_plain = capture(s, [&] { calls(plain); }), g_pdl = capture(s, [&] { calls(pdl); });
  // Interleaved, so a clock or thermal drift affects both alike.
  std::vector<double> t_plain, t_pdl;
  for (int r = 0; r < 3; ++r) {
    t_plain.push_back(graph_us(g_plain, s, chain, replays, reps));
    t_pdl.push_back(graph_us(g_pdl, s, chain, replays, reps));
  }
  std::sort(t_plain.begin(), t_plain.end());
  std::sort(t_pdl.begin(), t_pdl.end());
  row.plain_us = t_plain[1];
  row.pdl_us = t_pdl[1];
  cu().cuGraphExecDestroy(g_plain);
  cu().cuGraphExecDestroy(g_pdl);
  for (CUdeviceptr d : acts) cu().cuMemFree(d);
  for (CUdeviceptr d : {kv, d_bt, d_sl, ws}) cu().cuMemFree(d);
  return row;
}

}  // namespace

int main(int argc, char** argv) try {
  const int chain = std::stoi(arg(argc, argv, "chain", "32"));
  const int replays = std::stoi(arg(argc, argv, "replays", "50"));
  const int reps = std::stoi(arg(argc, argv, "reps", "7"));
  const std::string json_out = arg(argc, argv, "json", "");
  use_device(0);
  Runtime rt(RuntimeOptions::from_env());
  CUstream s = nullptr;
  ck(cu().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  std::vector<Row> rows;
  for (const Shape& sh : {Shape{1, 512}, Shape{1, 8192}, Shape{8, 2048}, Shape{64, 4096}})
    rows.push_back(measure(rt, s, sh, chain, replays, reps));

  fmt::print("\n| B | L | config | splits | kernels per call | plain us per call | PDL us per call | saved |\n"
             "|---|---|---|---|---|---|---|---|\n");
  cache::Json json = cache::Json::array();
  for (const Row& r : rows) {
    fmt::print("| {} | {} | {} | {} | {} | {:.2f} | {:.2f} | {:+.2f} us ({:+.1f}%) |\n", r.shape.batch, r.shape.seq_len,
               r.config, r.splits, r.kernels, r.plain_us, r.pdl_us, r.pdl_us - r.plain_us,
               100.0 * (r.pdl_us - r.plain_us) / r.plain_us);
    cache::Json e = cache::Json::object();
    e.set("batch", r.shape.batch).set("seq_len", r.shape.seq_len).set("config", r.config).set("splits", r.splits)
        .set("kernels_per_call", r.kernels).set("plain_us", r.plain_us).set("pdl_us", r.pdl_us);
    json.push(std::move(e));
  }
  if (!json_out.empty()) std::ofstream(json_out) << json.dump(2) << "\n";
  fmt::print("xqa_decode d128 h32/8 p32 bf16 q1; a graph of {} chained calls, {} replays x {} reps (median of 3 "
             "interleaved rounds)\n",
             chain, replays, reps);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_pdl: %s\n", e.what());
  return 1;
}
