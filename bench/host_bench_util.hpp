// What the three host benches (bench_host, bench_host_mla, bench_host_mxfp4) share: command-line lookup and
// timing of synchronous calls (wall median/best and process CPU time, which neighbours on a shared machine
// disturb less than wall time).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include <sys/resource.h>

#include "bench_args.hpp"
#include "common/numerics.cuh"
#include "ktune/cache/json.hpp"

namespace host_bench {

using Clock = std::chrono::steady_clock;

inline double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

using bench_args::arg;
using bench_args::flag;

// Process CPU time (every thread), in ms.
inline double cpu_ms() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return (u.ru_utime.tv_sec + u.ru_stime.tv_sec) * 1e3 + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e3;
}

struct Timing {
  double median_ms = 0, min_ms = 0, cpu_ms = 0;  // wall median / best per call; CPU ms per call (all threads)
};

// What every host bench writes with --json: the three variants' median ms per call (JIT-specialized, AOT with
// run-time shapes, JIT generic), the other two relative to the JIT-specialized one, the median cold compile of a
// host specialization and the thread count. A bench adds its own fields.
inline ktune::cache::Json variants_json(const Timing& jit, const Timing& aot, const Timing& generic,
                                        double compile_median_ms, int threads) {
  return ktune::cache::Json::object()
      .set("jit_ms", jit.median_ms).set("aot_ms", aot.median_ms).set("generic_ms", generic.median_ms)
      .set("ratio_aot", aot.median_ms / jit.median_ms).set("ratio_generic", generic.median_ms / jit.median_ms)
      .set("compile_median_ms", compile_median_ms).set("threads", threads);
}

// One warm-up call, then `iters` timed calls.
template <class F>
Timing time_calls(F&& call, int iters) {
  call();
  std::vector<double> t;
  const double c0 = cpu_ms();
  for (int i = 0; i < iters; ++i) {
    auto t0 = Clock::now();
    call();
    t.push_back(ms_since(t0));
  }
  const double cpu = (cpu_ms() - c0) / iters;
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], t.front(), cpu};
}

// Largest |a - b| over two bf16 arrays of the same length.
inline double max_abs_diff_bf16(const std::vector<uint16_t>& a, const std::vector<uint16_t>& b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, double(std::fabs(::ktune_common::bf16_to_float(a[i]) - ::ktune_common::bf16_to_float(b[i]))));
  return m;
}

// The three builds of one host kernel (JIT-specialized, AOT with run-time shapes, JIT generic): each called once
// and its output (`out`, which every call writes) compared with the JIT-specialized one's, then timed
// interleaved (3 rounds of `iters` calls each, so drift in clocks or neighbours hits them alike), keeping each
// one's best round.
struct Variants {
  Timing jit, aot, generic;
  double diff_aot = 0, diff_generic = 0;  // largest |output - the JIT-specialized output|
};
template <class J, class A, class G>
Variants time_variants(J&& run_jit, A&& run_aot, G&& run_generic, const std::vector<uint16_t>& out, int iters) {
  Variants v;
  run_jit();
  const std::vector<uint16_t> ref = out;
  run_aot();
  v.diff_aot = max_abs_diff_bf16(ref, out);
  run_generic();
  v.diff_generic = max_abs_diff_bf16(ref, out);
  for (int round = 0; round < 3; ++round) {
    const Timing a = time_calls(run_jit, iters), b = time_calls(run_aot, iters), c = time_calls(run_generic, iters);
    if (round == 0 || a.median_ms < v.jit.median_ms) v.jit = a;
    if (round == 0 || b.median_ms < v.aot.median_ms) v.aot = b;
    if (round == 0 || c.median_ms < v.generic.median_ms) v.generic = c;
  }
  return v;
}

}  // namespace host_bench
