// Runtime overheads: (1) 100 cached kernels -> launch-ready (SQLite read + integrity check +
// cuModuleLoadData), (2) host cost of one ktune launch (module-table lookup + typed launch) vs a bare
// cuLaunchKernel of the same function.
//   bench_runtime prepare --cache FILE [--arch sm_90a]   compile 100 kernels (no GPU needed)
//   bench_runtime run --cache FILE [--json OUT]          needs a GPU; runs with KTUNE_JIT off (0 compiles)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "driver_api.hpp"
#include "gpu_bench_util.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/launch.hpp"
#include "ktune/runtime.hpp"
#include "support/test_kernels.hpp"

using namespace ktune;
using bench::arg;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kKernels = 100;

double ms_since(Clock::time_point t0) { return std::chrono::duration<double, std::milli>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int prepare(const std::string& cache, const Arch& arch) {
  RuntimeOptions o;
  o.cache_path = cache;
  Runtime rt(o);
  auto t0 = Clock::now();
  for (int i = 0; i < kKernels; ++i) rt.ensure_binary(test::scale_kernel(i + 1, i), arch);
  fmt::print("prepared {} kernels for {} in {:.0f} ms ({} compiled)\n", kKernels, arch.str(), ms_since(t0),
             rt.stats().compiles);
  return 0;
}

int run(const std::string& cache, const std::string& json_out) {
  use_device(0);
  const auto& cu = detail::driver();
  RuntimeOptions o;
  o.cache_path = cache;
  o.allow_jit = false;  // any compile would throw: the bench proves the kernels come from the file

  // (1) cold load of 100 kernels into a fresh runtime, 5 repetitions.
  std::vector<double> load_total;
  RuntimeStats last{};
  for (int rep = 0; rep < 5; ++rep) {
    Runtime rt(o);
    auto t0 = Clock::now();
    for (int i = 0; i < kKernels; ++i)
      rt.get(fmt::format("scale/{}", i), [i] { return test::scale_kernel(i + 1, i); });
    load_total.push_back(ms_since(t0));
    last = rt.stats();
  }

  // (2) launch overhead: enqueue cost of a 1-block kernel, ktune vs bare driver call.
  Runtime rt(o);
  CUdeviceptr buf = 0;
  detail::check_cu(cu.cuMemAlloc(&buf, 1024 * sizeof(float)), "cuMemAlloc");
  CUstream stream = nullptr;
  detail::check_cu(cu.cuStreamCreate(&stream, 0), "cuStreamCreate");
  const float* in = reinterpret_cast<const float*>(buf);
  float* out = reinterpret_cast<float*>(buf) + 512;
  int n = 256;
  LaunchDims dims;
  dims.block[0] = 256;
  auto gen = [] { return test::scale_kernel(1, 0); };
  const LoadedKernel& k = rt.get("scale/0", gen);
  const int iters = 20000;
  std::vector<double> ktune_us, bare_us;
  for (int rep = 0; rep < 7; ++rep) {
    detail::check_cu(cu.cuStreamSynchronize(stream), "sync");
    auto t0 = Clock::now();
    for (int i = 0; i < iters; ++i) launch(rt.get("scale/0", gen), 0, dims, stream, in, out, n);
    ktune_us.push_back(ms_since(t0) * 1000 / iters);
    detail::check_cu(cu.cuStreamSynchronize(stream), "sync");
    void* params[] = {&in, &out, &n};
    t0 = Clock::now();
    for (int i = 0; i < iters; ++i)
      detail::check_cu(cu.cuLaunchKernel(static_cast<CUfunction>(k.functions[0]), 1, 1, 1, 256, 1, 1, 0, stream,
                                         params, nullptr),
                       "cuLaunchKernel");
    bare_us.push_back(ms_since(t0) * 1000 / iters);
  }
  detail::check_cu(cu.cuStreamSynchronize(stream), "sync");
  cu.cuMemFree(buf);

  double load_med = median(load_total), ktune_med = median(ktune_us), bare_med = median(bare_us);
  fmt::print("| metric | value |\n|---|---|\n");
  fmt::print("| load {} cached kernels -> launch-ready (median of 5) | {:.2f} ms ({:.3f} ms/kernel) |\n", kKernels,
             load_med, load_med / kKernels);
  fmt::print("| compiles during load | {} |\n| cache hits / loads | {} / {} |\n", last.compiles, last.cache_hits,
             last.loads);
  fmt::print("| ktune launch (lookup + typed launch), host us | {:.3f} |\n", ktune_med);
  fmt::print("| bare cuLaunchKernel, host us | {:.3f} |\n", bare_med);
  fmt::print("| ktune overhead per launch | {:.3f} us |\n", ktune_med - bare_med);
  if (!json_out.empty()) {
    ktune::cache::Json loads = ktune::cache::Json::array();
    for (double ms : load_total) loads.push(ms);
    std::ofstream(json_out) << ktune::cache::Json::object()
                                   .set("kernels", kKernels).set("load_ms_median", load_med)
                                   .set("load_ms_all", std::move(loads)).set("compiles", last.compiles)
                                   .set("cache_hits", last.cache_hits).set("ktune_launch_us", ktune_med)
                                   .set("bare_launch_us", bare_med)
                                   .dump()
                            << "\n";
  }
  return last.compiles == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_runtime prepare|run --cache FILE [--arch A] [--json OUT]\n");
    return 2;
  }
  std::string mode = argv[1], cache = arg(argc, argv, "cache", "bench_runtime.db");
  try {
    if (mode == "prepare") return prepare(cache, Arch::parse(arg(argc, argv, "arch", "sm_90a")));
    if (mode == "run") return run(cache, arg(argc, argv, "json", ""));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_runtime: %s\n", e.what());
    return 1;
  }
  return 2;
}
