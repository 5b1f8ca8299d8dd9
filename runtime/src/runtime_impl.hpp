// Runtime internals shared by runtime.cpp (binaries), module_table.cpp (per-context modules) and the tools.
#pragma once

#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#include "binary_key.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/runtime.hpp"

namespace ktune {

struct AtomicStats {
  std::atomic<int64_t> memory_hits{0}, cache_hits{0}, misses{0}, compiles{0}, compile_failures{0}, loads{0},
      tuning_misses{0};
  std::atomic<int64_t> compile_us{0}, load_us{0};
};

using BinaryPtr = std::shared_ptr<const cache::BinaryRecord>;

struct Runtime::Impl {
  explicit Impl(RuntimeOptions opts);
  ~Impl();

  RuntimeOptions options;
  std::unique_ptr<cache::LayeredCache> cache;
  AtomicStats stats;

  // Binaries by digest: finished ones, and the ones being looked up or compiled right now (single flight).
  std::mutex binaries_mutex;
  std::unordered_map<std::string, BinaryPtr> binaries;
  std::unordered_map<std::string, std::shared_future<BinaryPtr>> binaries_in_flight;

  // Loaded modules by context, then fast key (two levels so a lookup allocates nothing).
  struct Slot {
    std::mutex mutex;
    std::unique_ptr<LoadedKernel> kernel;  // set once loaded
  };
  std::shared_mutex modules_mutex;
  std::unordered_map<void*, std::unordered_map<std::string, std::shared_ptr<Slot>>> modules;

  // Tuned configs by "family\nkey\nfingerprint" ("" = known miss), and device fingerprints by context.
  std::mutex tuning_mutex;
  std::unordered_map<std::string, std::string> tuned;
  std::unordered_map<void*, std::string> fingerprints;
  const std::string& fingerprint_of(void* ctx);
  // Checked kernels' fault records by context: pinned host memory and its device address (device_report.cpp).
  struct Report {
    void* host = nullptr;
    unsigned long long device = 0;
  };
  std::mutex reports_mutex;
  std::unordered_map<void*, Report> reports;
  void free_reports();

  // The binary for (kernel, arch): memory, then cache layers, then the compiler. Sets *compiled.
  BinaryPtr obtain_binary(const GeneratedKernel& kernel, const Arch& arch, bool* compiled);
  BinaryPtr lookup_or_compile(const GeneratedKernel& kernel, const Arch& arch, const detail::BinaryKey& key,
                              const std::vector<std::string>& options, bool* compiled);
  void dump(const GeneratedKernel& kernel, const detail::BinaryKey& key, const std::vector<uint8_t>& blob);
};

}  // namespace ktune
