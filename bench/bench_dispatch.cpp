// Host cost of one call, per family and per way of calling it, with the GPU kept busy by a spin kernel so no
// launch waits for a free queue slot: the prepared C++ op (op.run), the C op (ktune_op_run), the one-shot C++
// and C calls, against a bare cuLaunchKernel of the very same launches. The bare launches are read back from a
// CUDA graph captured around op.run (function, grid, block, shared memory and parameter buffers), so both sides
// launch identical kernels with identical arguments.
//   bench_dispatch [--calls 300] [--reps 9] [--json OUT]      (needs a GPU; compiles its kernels on first use)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "gpu_bench_util.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/error.hpp"
#include "ktune/ktune.h"
#include "ktune/mxfp4_gemm.hpp"
#include "ktune/runtime.hpp"
#include "ktune/sparse_mla_decode.hpp"
#include "ktune/xqa_decode.hpp"

using namespace ktune;
using namespace ktune::bench;
using Clock = std::chrono::steady_clock;

namespace {

// Keeps the GPU busy for ~`ms` so every measured launch is only enqueued.
struct Spinner {
  const LoadedKernel* kernel = nullptr;
  long long cycles = 0;
  Spinner(Runtime& rt, double ms) {
    GeneratedKernel k;
    k.family = "bench_spin";
    k.problem_key = "spin";
    k.config_key = "default";
    k.source = R"(
namespace ktune_bench {
template <int N>
__global__ void spin(long long cycles) {
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) {
  }
}
}  // namespace ktune_bench
)";
    k.entry_points = {"ktune_bench::spin<1>"};
    kernel = &rt.get("bench_spin/spin", [&] { return k; });
    int khz = 0;
    CUdevice dev = 0;
    ck(cu().cuCtxGetDevice(&dev), "cuCtxGetDevice");
    ck(cu().cuDeviceGetAttribute(&khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, dev), "clock rate");
    cycles = static_cast<long long>(ms * khz);
  }
  void start(CUstream s) const {
    void* params[] = {const_cast<long long*>(&cycles)};
    ck(cu().cuLaunchKernel(static_cast<CUfunction>(kernel->functions[0]), 1, 1, 1, 1, 1, 1, 0, s, params, nullptr),
       "spin");
  }
};

// The launches of one call, captured in a graph: replayed as bare cuLaunchKernel calls.
struct BareLaunches {
  CUgraph graph = nullptr;
  std::vector<CUDA_KERNEL_NODE_PARAMS> nodes;
  BareLaunches(CUstream s, const std::function<void()>& call) {
    ck(cu().cuStreamBeginCapture(s, CU_STREAM_CAPTURE_MODE_GLOBAL), "begin capture");
    call();
    ck(cu().cuStreamEndCapture(s, &graph), "end capture");
    size_t n = 0;
    ck(cu().cuGraphGetNodes(graph, nullptr, &n), "cuGraphGetNodes");
    std::vector<CUgraphNode> list(n);
    ck(cu().cuGraphGetNodes(graph, list.data(), &n), "cuGraphGetNodes");
    for (CUgraphNode node : list) {
      CUDA_KERNEL_NODE_PARAMS p{};
      ck(cu().cuGraphKernelNodeGetParams(node, &p), "cuGraphKernelNodeGetParams");
      nodes.push_back(p);
    }
  }
  ~BareLaunches() { cu().cuGraphDestroy(graph); }
  void launch(CUstream s) const {
    for (const auto& p : nodes)
      ck(cu().cuLaunchKernel(p.func, p.gridDimX, p.gridDimY, p.gridDimZ, p.blockDimX, p.blockDimY, p.blockDimZ,
                             p.sharedMemBytes, s, p.kernelParams, nullptr),
         "bare launch");
  }
};

struct Row {
  std::string family, way;
  double us = 0;
  int launches = 0;
};

// Median over `reps` of the host time per call of `calls` back-to-back calls behind a spin kernel.
double host_us(const Spinner& spin, CUstream s, int calls, int reps, const std::function<void()>& call) {
  std::vector<double> per;
  for (int r = 0; r < reps; ++r) {
    ck(cu().cuStreamSynchronize(s), "sync");
    spin.start(s);
    const auto t0 = Clock::now();
    for (int i = 0; i < calls; ++i) call();
    per.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count() / calls);
  }
  ck(cu().cuStreamSynchronize(s), "sync");
  std::sort(per.begin(), per.end());
  return per[per.size() / 2];
}

struct Ways {
  std::string family;
  std::function<void(CUstream)> op_run, c_op_run, one_shot, c_one_shot;
};

void measure(const Ways& w, const Spinner& spin, CUstream s, int calls, int reps, std::vector<Row>* rows) {
  w.op_run(s);  // loads the module; the graph below then captures exactly the steady-state launches
  ck(cu().cuStreamSynchronize(s), "sync");
  BareLaunches bare(s, [&] { w.op_run(s); });
  const int n = static_cast<int>(bare.nodes.size());
  auto add = [&](const char* way, const std::function<void(CUstream)>& f) {
    rows->push_back({w.family, way, host_us(spin, s, calls, reps, [&] { f(s); }), n});
  };
  add("bare cuLaunchKernel", [&](CUstream st) { bare.launch(st); });
  add("C++ op.run", w.op_run);
  add("C ktune_op_run", w.c_op_run);
  add("C++ one-shot", w.one_shot);
  add("C one-shot", w.c_one_shot);
}

void check_c(ktune_status st, const char* what) {
  if (st != KTUNE_OK) throw Error(static_cast<Status>(st), "bench_dispatch", fmt::format("{}: {}", what, ktune_last_error()));
}

}  // namespace

int main(int argc, char** argv) try {
  const int calls = std::stoi(arg(argc, argv, "calls", "300"));
  const int reps = std::stoi(arg(argc, argv, "reps", "9"));
  const std::string json_out = arg(argc, argv, "json", "");
  use_device(0);
  Runtime rt(RuntimeOptions::from_env());
  ktune_runtime_options co;
  ktune_runtime_options_default(&co);
  ktune_runtime* crt = nullptr;
  check_c(ktune_runtime_create(&co, &crt), "ktune_runtime_create");
  CUstream s = nullptr;
  ck(cu().cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  const Spinner spin(rt, 40.0);
  std::vector<Row> rows;

  {  // xqa_decode: Llama-3.1-8B decode, B1, L512 (split-KV + combine on the H200)
    xqa::Problem p;
    p.mask = xqa::MaskKind::None;
    const int B = 1, L = 512, pages = L / p.page_size;
    const size_t page_bytes = size_t(2) * p.num_kv_heads * p.page_size * p.head_dim * 2;
    CUdeviceptr q = alloc(size_t(B) * p.num_q_heads * p.head_dim * 2, 0x3c), kv = alloc(pages * page_bytes, 0x3c),
                out = alloc(size_t(B) * p.num_q_heads * p.head_dim * 2, 0);
    std::vector<int> bt(pages);
    for (int i = 0; i < pages; ++i) bt[i] = i;
    CUdeviceptr d_bt = alloc(bt.size() * 4, 0), d_sl = alloc(4, 0);
    ck(cu().cuMemcpyHtoD(d_bt, bt.data(), bt.size() * 4), "upload");
    ck(cu().cuMemcpyHtoD(d_sl, &L, 4), "upload");
    XqaDecodeArgs a;
    a.q = ptr<void>(q), a.kv_cache = ptr<void>(kv), a.block_tables = ptr<int32_t>(d_bt), a.seq_lens = ptr<int32_t>(d_sl);
    a.out = ptr<void>(out), a.batch = B, a.num_tokens = B, a.max_pages_per_req = pages, a.num_pages = pages;
    a.max_seq_len = L, a.softmax_scale = 0.088f;
    XqaDecodeOp op = xqa::prepare(rt, p);
    const XqaDecodePlan plan = op.plan(a);
    CUdeviceptr ws = alloc(std::max<size_t>(plan.workspace_bytes, 16), 0);
    a.workspace = ptr<void>(ws), a.workspace_bytes = plan.workspace_bytes;
    ktune_xqa_args c;
    ktune_xqa_args_default(&c);
    c.q = a.q, c.kv_cache = a.kv_cache, c.block_tables = a.block_tables, c.seq_lens = a.seq_lens, c.out = a.out;
    c.workspace = a.workspace, c.workspace_bytes = a.workspace_bytes, c.batch = B, c.num_tokens = B;
    c.max_pages_per_req = pages, c.num_pages = pages, c.max_seq_len = L, c.softmax_scale = a.softmax_scale;
    ktune_op* cop = nullptr;
    const std::string key = p.key();
    check_c(ktune_op_prepare(crt, "xqa_decode", key.c_str(), &cop), "ktune_op_prepare");
    measure({"xqa_decode", [&](CUstream st) { op.run(a, st); },
             [&](CUstream st) { check_c(ktune_op_run(cop, &c, st), "ktune_op_run"); },
             [&](CUstream st) { xqa_decode(rt, p, a, st); },
             [&](CUstream st) { check_c(ktune_xqa_decode(crt, key.c_str(), &c, st), "ktune_xqa_decode"); }},
            spin, s, calls, reps, &rows);
    fmt::print("xqa_decode {} B{} L{}: config {} ({}), {} splits\n", key, B, L, plan.config, plan.source,
               plan.num_splits);
    ktune_op_free(cop);
  }
  {  // sparse_mla_decode: DeepSeek-V3.2 decode, 64 tokens x 128 heads x top-2048 (indices -1: nothing gathered)
    mla::Problem p;
    const int T = 64;
    CUdeviceptr q = alloc(size_t(T) * p.num_heads * p.dim() * 2, 0x3c), kv = alloc(size_t(p.page_size) * p.row_bytes(), 0),
                idx = alloc(size_t(T) * p.topk * 4, 0xff), out = alloc(size_t(T) * p.num_heads * p.kv_lora_rank * 2, 0);
    SparseMlaDecodeArgs a;
    a.q = ptr<void>(q), a.kv_cache = ptr<void>(kv), a.indices = ptr<int32_t>(idx), a.out = ptr<void>(out);
    a.num_tokens = T, a.num_pages = 1, a.softmax_scale = 0.0417f;
    SparseMlaDecodeOp op = mla::prepare(rt, p);
    const SparseMlaDecodePlan plan = op.plan(a);
    CUdeviceptr ws = alloc(std::max<size_t>(plan.workspace_bytes, 16), 0);
    a.workspace = ptr<void>(ws), a.workspace_bytes = plan.workspace_bytes;
    ktune_sparse_mla_args c;
    ktune_sparse_mla_args_default(&c);
    c.q = a.q, c.kv_cache = a.kv_cache, c.indices = a.indices, c.out = a.out, c.workspace = a.workspace;
    c.workspace_bytes = a.workspace_bytes, c.num_tokens = T, c.num_pages = 1, c.softmax_scale = a.softmax_scale;
    ktune_op* cop = nullptr;
    const std::string key = p.key();
    check_c(ktune_op_prepare(crt, "sparse_mla_decode", key.c_str(), &cop), "ktune_op_prepare");
    measure({"sparse_mla_decode", [&](CUstream st) { op.run(a, st); },
             [&](CUstream st) { check_c(ktune_op_run(cop, &c, st), "ktune_op_run"); },
             [&](CUstream st) { sparse_mla_decode(rt, p, a, st); },
             [&](CUstream st) { check_c(ktune_sparse_mla_decode(crt, key.c_str(), &c, st), "ktune_sparse_mla_decode"); }},
            spin, s, calls, reps, &rows);
    fmt::print("sparse_mla_decode {} T{}: config {} ({}), {} splits\n", key, T, plan.config, plan.source,
               plan.num_splits);
    ktune_op_free(cop);
  }
  {  // mxfp4_gemm: dense N = K = 8192, one row (decode)
    mxfp4::Problem p;
    p.n = 8192, p.k = 8192;
    const int M = 1;
    CUdeviceptr A = alloc(size_t(M) * p.k * 2, 0x3c), C = alloc(size_t(M) * p.n * 2, 0),
                W = alloc(mxfp4::packed_weight_bytes(p.n, p.k, 1), 0x11), S = alloc(mxfp4::packed_scale_bytes(p.n, p.k, 1), 0x7f);
    Mxfp4GemmArgs a;
    a.a = ptr<void>(A), a.c = ptr<void>(C), a.m = M;
    a.weight = Mxfp4Weight{mxfp4::packed_layout_version(), p.n, p.k, 1, ptr<void>(W), ptr<void>(S)};
    Mxfp4GemmOp op = mxfp4::prepare(rt, p);
    const Mxfp4GemmPlan plan = op.plan(a);
    ktune_mxfp4_args c;
    ktune_mxfp4_args_default(&c);
    c.a = a.a, c.c = a.c, c.m = M, c.weight_packed = a.weight.packed, c.weight_scales = a.weight.scales;
    ktune_op* cop = nullptr;
    const std::string key = p.key();
    check_c(ktune_op_prepare(crt, "mxfp4_gemm", key.c_str(), &cop), "ktune_op_prepare");
    measure({"mxfp4_gemm", [&](CUstream st) { op.run(a, st); },
             [&](CUstream st) { check_c(ktune_op_run(cop, &c, st), "ktune_op_run"); },
             [&](CUstream st) { mxfp4_gemm(rt, p, a, st); },
             [&](CUstream st) { check_c(ktune_mxfp4_gemm(crt, key.c_str(), &c, st), "ktune_mxfp4_gemm"); }},
            spin, s, calls, reps, &rows);
    fmt::print("mxfp4_gemm {} M{}: config {} ({})\n", key, M, plan.config, plan.source);
    ktune_op_free(cop);
  }

  fmt::print("\n| family | way | launches | host us per call | over bare |\n|---|---|---|---|---|\n");
  cache::Json json = cache::Json::array();
  for (const Row& r : rows) {
    double bare = 0;
    for (const Row& b : rows)
      if (b.family == r.family && b.way == "bare cuLaunchKernel") bare = b.us;
    fmt::print("| {} | {} | {} | {:.2f} | {:+.2f} |\n", r.family, r.way, r.launches, r.us, r.us - bare);
    cache::Json e = cache::Json::object();
    e.set("family", r.family).set("way", r.way).set("launches", r.launches).set("host_us", r.us)
        .set("over_bare_us", r.us - bare);
    json.push(std::move(e));
  }
  if (!json_out.empty()) std::ofstream(json_out) << json.dump(2) << "\n";
  fmt::print("calls per repetition {}, repetitions {} (median), GPU busy behind a spin kernel\n", calls, reps);
  ktune_runtime_destroy(crt);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "bench_dispatch: %s\n", e.what());
  return 1;
}
