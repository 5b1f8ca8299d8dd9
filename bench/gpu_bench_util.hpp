// What the GPU benches share: the driver table, checked calls, `--name value` arguments, filled device buffers,
// the parallel compile of a bench's candidate kernels (`prepare`) and the copy bandwidth of the device.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "autotune/workload.hpp"
#include "bench_args.hpp"
#include "driver_api.hpp"
#include "ktune/cache/json.hpp"
#include "ktune/device.hpp"
#include "ktune/runtime.hpp"

namespace ktune::bench {

using bench_args::arg;
using bench_args::flag;

inline const detail::DriverApi& cu() { return detail::driver(); }
inline void ck(CUresult r, const char* what) { detail::check_cu(r, what); }

// `bytes` of device memory, every byte `fill` (a constant bit pattern: the benches time memory traffic, not values).
inline CUdeviceptr alloc(size_t bytes, unsigned char fill) {
  CUdeviceptr p = 0;
  ck(cu().cuMemAlloc(&p, bytes), "cuMemAlloc");
  ck(cu().cuMemsetD8(p, fill, bytes), "cuMemsetD8");
  return p;
}

template <class T>
T* ptr(CUdeviceptr p) {
  return reinterpret_cast<T*>(static_cast<uintptr_t>(p));
}

// Compiles `jobs` (identical sources of one problem once) into the runtime's cache for `arch` on up to 16
// threads; a cached kernel costs a lookup, so a cache built by another NVRTC is refreshed quickly. Prints one
// line per kernel and a summary naming `bench`; returns the process exit code (1 if any failed).
inline int compile_all(Runtime& rt, const std::vector<GeneratedKernel>& all, const Arch& arch, const char* bench) {
  std::vector<const GeneratedKernel*> jobs;
  for (const GeneratedKernel& g : all) {
    const bool dup = std::any_of(jobs.begin(), jobs.end(), [&](const GeneratedKernel* j) {
      return j->source == g.source && j->problem_key == g.problem_key;
    });
    if (!dup) jobs.push_back(&g);
  }
  std::atomic<size_t> next{0};
  std::atomic<int> failed{0};
  std::mutex print_mutex;
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < std::max(1u, std::min(16u, std::thread::hardware_concurrency())); ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < jobs.size(); i = next++) {
        try {
          const EnsureResult e = rt.ensure_binary(*jobs[i], arch);
          std::lock_guard<std::mutex> lock(print_mutex);
          fmt::print("{} {}\n", e.compiled ? "compiled" : "cached  ", e.name);
        } catch (const std::exception& e) {
          ++failed;
          std::lock_guard<std::mutex> lock(print_mutex);
          fmt::print("FAILED {}/{}: {}\n", jobs[i]->problem_key, jobs[i]->config_key, e.what());
        }
      }
    });
  for (auto& t : pool) t.join();
  fmt::print("{} prepare: {} kernels for {}, {} compiled, {} failed\n", bench, jobs.size(), arch.str(),
             rt.stats().compiles, failed.load());
  return failed ? 1 : 0;
}

// `reps` calls of config `cfg` of a tuning workload on `stream`, each between its own pair of `ev` (2 * reps
// events), after `warmup` untimed calls; and the compiles and loads the runtime did meanwhile (the benches show
// they are 0: every kernel comes from the cache, loaded before the timing).
struct CallTimes {
  double median_us = 0, min_us = 0;
  int64_t compiles = 0, loads = 0;
};
inline CallTimes time_calls(Runtime& rt, autotune::Workload& w, const std::string& cfg, CUstream stream,
                            const std::vector<CUevent>& ev, int reps, int warmup) {
  for (int i = 0; i < warmup; ++i) w.launch(cfg, stream);
  ck(cu().cuStreamSynchronize(stream), "warmup");
  const RuntimeStats before = rt.stats();
  for (int i = 0; i < reps; ++i) {
    ck(cu().cuEventRecord(ev[2 * i], stream), "cuEventRecord");
    w.launch(cfg, stream);
    ck(cu().cuEventRecord(ev[2 * i + 1], stream), "cuEventRecord");
  }
  ck(cu().cuStreamSynchronize(stream), "timed calls");
  const RuntimeStats after = rt.stats();
  std::vector<double> t(reps);
  for (int i = 0; i < reps; ++i) {
    float ms = 0;
    ck(cu().cuEventElapsedTime(&ms, ev[2 * i], ev[2 * i + 1]), "cuEventElapsedTime");
    t[i] = ms * 1e3;
  }
  std::sort(t.begin(), t.end());
  CallTimes c;
  c.median_us = t[t.size() / 2];
  c.min_us = t.front();
  c.compiles = after.compiles - before.compiles;
  c.loads = after.loads - before.loads;
  return c;
}

// Copy bandwidth of this device: cuMemcpyDtoD of `bytes` back and forth, (read + write) / time, median of 10
// after 3 warm-up copies.
inline double copy_tbs(size_t bytes) {
  const CUdeviceptr a = alloc(bytes, 0x3C), b = alloc(bytes, 0x3C);
  CUevent e0 = nullptr, e1 = nullptr;
  ck(cu().cuEventCreate(&e0, CU_EVENT_DEFAULT), "cuEventCreate");
  ck(cu().cuEventCreate(&e1, CU_EVENT_DEFAULT), "cuEventCreate");
  std::vector<double> t;
  for (int i = 0; i < 13; ++i) {
    ck(cu().cuEventRecord(e0, nullptr), "cuEventRecord");
    ck(cu().cuMemcpyDtoD(i & 1 ? a : b, i & 1 ? b : a, bytes), "cuMemcpyDtoD");
    ck(cu().cuEventRecord(e1, nullptr), "cuEventRecord");
    ck(cu().cuEventSynchronize(e1), "cuEventSynchronize");
    float ms = 0;
    ck(cu().cuEventElapsedTime(&ms, e0, e1), "cuEventElapsedTime");
    if (i >= 3) t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cu().cuEventDestroy(e0);
  cu().cuEventDestroy(e1);
  cu().cuMemFree(a);
  cu().cuMemFree(b);
  return 2.0 * bytes / (t[t.size() / 2] * 1e-3) / 1e12;
}

// What a GPU bench's timed run holds besides its runtime: the device's description, a non-blocking stream,
// 2 * reps timing events (for time_calls) and the copy bandwidth of the device, measured and printed once at
// the start; the stream and events are released with it.
struct TimingSession {
  SystemInfo sys = system_info();
  DeviceInfo dev = sys.devices.at(0);
  CUstream stream = nullptr;
  std::vector<CUevent> ev;
  double copy = 0;  // TB/s, copy_tbs of 2 GiB

  TimingSession(const Arch& arch, int reps) : ev(2 * reps) {
    ck(cu().cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    for (CUevent& e : ev) ck(cu().cuEventCreate(&e, CU_EVENT_DEFAULT), "cuEventCreate");
    copy = copy_tbs(size_t(2) << 30);
    fmt::print("device {} ({}), {} SMs; copy (cuMemcpyDtoD 2 GiB, read+write) {:.2f} TB/s\n", dev.name, arch.str(),
               dev.sm_count, copy);
    std::fflush(stdout);
  }
  // The members every kernel bench's JSON opens with: the bench, the device it ran on and the copy rate beside it.
  cache::Json json_header(const char* bench, const Arch& arch, int reps) const {
    cache::Json j = cache::Json::object();
    j.set("bench", bench).set("device", dev.name).set("arch", arch.str()).set("sm_count", dev.sm_count);
    j.set("driver", sys.driver_version).set("nvrtc", sys.nvrtc_version).set("reps", reps).set("copy_tbs", copy);
    return j;
  }
  ~TimingSession() {
    for (CUevent e : ev)
      if (e) cu().cuEventDestroy(e);
    if (stream) cu().cuStreamDestroy(stream);
  }
  TimingSession(const TimingSession&) = delete;
  TimingSession& operator=(const TimingSession&) = delete;
};

}  // namespace ktune::bench
