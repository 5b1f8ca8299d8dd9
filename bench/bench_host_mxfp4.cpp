// Host backend bench for mxfp4_gemm: the JIT-specialized host kernel (n, k and the tunables
// compile-time constants, compiled for this CPU by libktune_host.so) against the same kernel source
// (templates/mxfp4_gemm/host_kernel.h) compiled ahead of time into this binary (-O3 -march=native) with run-time
// n and k — what a library without JIT would ship — and, to separate specialization from compiler, against the
// same run-time-shape code compiled by the JIT (clang 19 at O3 for this CPU). All three run on the same thread
// pool over the same work items and inputs. Also: compile time of each host specialization (cold, no cache).
//
//   bench_host_mxfp4 [--m 16] [--n 2880] [--k 2880] [--threads 0] [--iters 20] [--json OUT]
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "host_bench_util.hpp"
#include "ktune_internal/host_pool.hpp"
#include "ktune/mxfp4_gemm_host.hpp"
#include "ktune/runtime.hpp"
#include "mxfp4_gemm/host_kernel.h"
#include "mxfp4_gemm/spec.hpp"
#include "support/temp_dir.hpp"

using namespace ktune;
using namespace host_bench;  // arg, flag, time_calls, ... (host_bench_util.hpp)
namespace kc = ::ktune_common;

namespace {

// The run-time-shape spec: bf16 in / bf16 out, dense, the default host config's tunables (bm4.tn4.kt1), n and k
// run-time members. The source text is identical for the AOT build (here) and the generic JIT build.
const char* const kDynSpecSource = R"(
namespace ktune_bench {
struct DynMx {
  int kN, kK;
  static constexpr int kAType = 0, kOutType = 0;
  static constexpr bool kGrouped = false;
  static constexpr int kBM = 4, kTN = 4, kKT = 1;
};
}  // namespace ktune_bench
)";

}  // namespace

// The same text, compiled here ahead of time.
namespace ktune_bench {
struct DynMx {
  int kN, kK;
  static constexpr int kAType = 0, kOutType = 0;
  static constexpr bool kGrouped = false;
  static constexpr int kBM = 4, kTN = 4, kKT = 1;
};
}  // namespace ktune_bench

namespace {

using DynEntry = void (*)(const ktune_bench::DynMx&, const ktune_mxfp4::HostWork&, int, int);

void aot_gemm(const ktune_bench::DynMx& s, const ktune_mxfp4::HostWork& w, int b, int e) {
  ktune_mxfp4::host::Kernel<ktune_bench::DynMx>::run(s, w, b, e);
}

}  // namespace

int main(int argc, char** argv) {
  std::string why;
  if (!Runtime::host_available(&why)) {
    fmt::print("bench_host_mxfp4: the LLVM host backend is absent ({})\n", why);
    return 1;
  }
  const int m = std::stoi(arg(argc, argv, "m", "16"));
  const int n = std::stoi(arg(argc, argv, "n", "2880"));
  const int k = std::stoi(arg(argc, argv, "k", "2880"));
  int threads = std::stoi(arg(argc, argv, "threads", "0"));
  const int iters = std::stoi(arg(argc, argv, "iters", "20"));
  const std::string json_out = arg(argc, argv, "json", "");
  if (threads <= 0) threads = detail::HostPool::hardware_threads();

  mxfp4::Problem p;
  p.n = n;
  p.k = k;
  p.validate();
  Arch host;
  host.host = true;
  const mxfp4::Config cfg = mxfp4::Config::host_config(4, 4, 1);  // = DynMx's tunables (the host default)

  test::TempDir dir;
  RuntimeOptions o;
  o.cache_path = dir.file("bench_host_mxfp4.db");
  Runtime rt(o);

  // (1) compile time of every host specialization of this problem (cold: empty cache).
  std::vector<double> compile_ms;
  std::vector<std::string> compile_rows;
  for (const mxfp4::Config& c : mxfp4::search_space(p, host)) {
    const EnsureResult r = rt.ensure_binary(mxfp4::generate(p, c, host), host);
    compile_ms.push_back(r.compile_ms);
    compile_rows.push_back(fmt::format("{}:{:.0f}", c.key(), r.compile_ms));
  }
  std::vector<double> sorted = compile_ms;
  std::sort(sorted.begin(), sorted.end());

  // (2) inputs: random canonical weight, prepacked; N(0,1) activations.
  std::mt19937_64 rng(42);
  std::vector<uint8_t> w(size_t(n) * k / 2), s(size_t(n) * k / 32);
  for (auto& b : w) b = uint8_t(rng());
  for (auto& b : s) b = uint8_t(120 + rng() % 13);
  std::vector<uint8_t> pw(mxfp4::packed_weight_bytes(n, k, 1)), ps(mxfp4::packed_scale_bytes(n, k, 1));
  mxfp4::prepack_host(w.data(), s.data(), n, k, 1, pw.data(), ps.data());
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<uint16_t> a(size_t(m) * k), c(size_t(m) * n);
  for (auto& x : a) x = kc::float_to_bf16(nd(rng));

  // The work split the launcher uses (dense: slabs of host_slab_rows() rows x N tiles).
  std::vector<int> slabs;
  for (int r = 0; r < m; r += mxfp4::host_slab_rows()) slabs.insert(slabs.end(), {0, r, std::min(m, r + mxfp4::host_slab_rows())});
  ktune_mxfp4::HostWork hw{};
  hw.p.a = a.data();
  hw.p.w = reinterpret_cast<const unsigned*>(pw.data());
  hw.p.s = reinterpret_cast<const unsigned*>(ps.data());
  hw.p.c = c.data();
  hw.p.m = m;
  hw.p.n = n;
  hw.p.k = k;
  hw.p.lda = k;
  hw.p.ldc = n;
  hw.p.num_experts = 1;
  hw.slabs = slabs.data();
  hw.num_slabs = int(slabs.size() / 3);
  hw.n_tiles = mxfp4::host_n_tiles(p, cfg);
  const int items = hw.num_slabs * hw.n_tiles;
  auto& pool = detail::HostPool::instance();

  const LoadedKernel& spec = mxfp4_gemm_host_kernel(rt, p, cfg.key());
  using Entry = void (*)(const ktune_mxfp4::HostWork&, int, int);
  const Entry jit_gemm = reinterpret_cast<Entry>(spec.functions[0]);

  const ktune_bench::DynMx dyn{n, k};
  GeneratedKernel generic;
  generic.family = "bench_host_mxfp4";
  generic.problem_key = "generic_bf16_dense";
  generic.config_key = cfg.key();
  generic.source = std::string("#include \"mxfp4_gemm/host_kernel.h\"\n") + kDynSpecSource +
                   "namespace ktune_bench {\n"
                   "void generic_gemm(const DynMx& s, const ktune_mxfp4::HostWork& w, int b, int e) {\n"
                   "  ktune_mxfp4::host::Kernel<DynMx>::run(s, w, b, e);\n}\n}\n";
  generic.entry_points = {"ktune_bench::generic_gemm"};
  const auto t_generic = Clock::now();
  const LoadedKernel& gen = rt.get_host("bench_host_mxfp4/generic", [&] { return generic; });
  const double generic_compile_ms = ms_since(t_generic);
  const DynEntry gen_gemm = reinterpret_cast<DynEntry>(gen.functions[0]);

  auto run_jit = [&] { pool.run(threads, items, 1, [&](int b, int e) { jit_gemm(hw, b, e); }); };
  auto run_aot = [&] { pool.run(threads, items, 1, [&](int b, int e) { aot_gemm(dyn, hw, b, e); }); };
  auto run_generic = [&] { pool.run(threads, items, 1, [&](int b, int e) { gen_gemm(dyn, hw, b, e); }); };

  const Variants v = time_variants(run_jit, run_aot, run_generic, c, iters);
  const Timing &tj = v.jit, &ta = v.aot, &tg = v.generic;
  const double diff_aot = v.diff_aot, diff_gen = v.diff_generic;
  const double w_bytes = double(pw.size() + ps.size());
  const double flops = 2.0 * m * double(n) * k;
  const double ratio_aot = ta.median_ms / tj.median_ms, ratio_gen = tg.median_ms / tj.median_ms;
  const std::string tid = Runtime::host_target_id();

  fmt::print("host: {} ({} threads); LLVM {}\n", tid.substr(0, tid.find('/', tid.find('/') + 1)), threads,
             tid.substr(tid.rfind("llvm")));
  fmt::print("shape: M={} N={} K={} bf16-bf16 dense, config {}, {} work items\n", m, n, k, cfg.key(), items);
  fmt::print("| variant | median ms | best ms | CPU ms/call | weight GB/s | GFLOP/s | time vs JIT-specialized | CPU vs JIT | max abs diff vs JIT |\n"
             "|---|---|---|---|---|---|---|---|---|\n");
  const auto row = [&](const char* name, const Timing& t, double diff) {
    fmt::print("| {} | {:.3f} | {:.3f} | {:.3f} | {:.2f} | {:.1f} | {:.2f}x | {:.2f}x | {:.2g} |\n", name, t.median_ms,
               t.min_ms, t.cpu_ms, w_bytes / t.median_ms / 1e6, flops / t.median_ms / 1e6, t.median_ms / tj.median_ms,
               t.cpu_ms / tj.cpu_ms, diff);
  };
  row("JIT specialized (clang 19, constants)", tj, 0);
  row("AOT, run-time n/k (g++ -O3 -march=native)", ta, diff_aot);
  row("JIT generic, run-time n/k (clang 19)", tg, diff_gen);
  fmt::print("compile per host specialization (cold, {} configs): median {:.0f} ms, min {:.0f}, max {:.0f}; generic: {:.0f} ms\n",
             compile_ms.size(), sorted[sorted.size() / 2], sorted.front(), sorted.back(), generic_compile_ms);
  fmt::print("  {}\n", fmt::join(compile_rows, " "));
  if (!json_out.empty()) {
    std::ofstream(json_out) << variants_json(tj, ta, tg, sorted[sorted.size() / 2], threads).dump() << "\n";
  }
  return 0;
}
