// Puts the kernels a GPU test matrix uses into the runtime's cache ahead of its launches (the `[*_precompile]`
// tests fill the H200 pack this way, with no GPU): each job is a label and the generator of one module, run on
// up to 16 threads; a job whose generator or compile throws is counted and printed, never fatal.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <exception>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/kernel_spec.hpp"
#include "ktune/runtime.hpp"

namespace ktune::test {

using PrecompileJob = std::pair<std::string, std::function<GeneratedKernel()>>;  // (label, generator)

inline void precompile_jobs(Runtime& rt, const std::vector<PrecompileJob>& jobs, const Arch& arch, int* compiled,
                            int* failed) {
  std::atomic<size_t> next{0};
  std::atomic<int> n_compiled{0}, n_failed{0};
  const unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 16u));
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      for (size_t i = next++; i < jobs.size(); i = next++) {
        try {
          if (rt.ensure_binary(jobs[i].second(), arch).compiled) ++n_compiled;
        } catch (const std::exception& e) {
          ++n_failed;
          std::printf("precompile %s failed: %s\n", jobs[i].first.c_str(), e.what());
        }
      }
    });
  for (auto& th : pool) th.join();
  *compiled = n_compiled;
  *failed = n_failed;
}

}  // namespace ktune::test
