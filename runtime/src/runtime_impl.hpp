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
#include "key_locks.hpp"
#include "ktune/cache/layered.hpp"
#include "ktune/runtime.hpp"

namespace ktune {

struct AtomicStats {
  std::atomic<int64_t> memory_hits{0}, cache_hits{0}, misses{0}, compiles{0}, compile_failures{0}, loads{0},
      tuning_misses{0}, quarantined{0}, store_failures{0};
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
  // Binaries compiled but not stored (no writable layer, or the write failed), by digest: why.
  std::unordered_map<std::string, std::string> not_stored_by_digest;
  std::string last_store_failure;
  // Why copies of a binary (by readable name) were quarantined, for the error of a later miss.
  std::unordered_map<std::string, std::string> quarantine_notes;
  // Cross-process single flight on the writable layer, for compiles and for tunings (null without one).
  std::unique_ptr<detail::KeyLocks> compile_locks, tuning_locks;
  static constexpr double kCompileLockWait_s = 600;  // a compile that takes longer is stuck, not slow

  // Loaded modules by context identity (detail::context_id), then fast key (two levels so a lookup allocates
  // nothing).
  struct Slot {
    std::mutex mutex;
    std::unique_ptr<LoadedKernel> kernel;  // set once loaded
  };
  std::shared_mutex modules_mutex;
  std::unordered_map<void*, std::unordered_map<std::string, std::shared_ptr<Slot>>> modules;

  // Tuned configs by "family\nkey\nfingerprint" ("" = known miss), and device fingerprints by context identity.
  std::mutex tuning_mutex;
  std::unordered_map<std::string, std::string> tuned;
  bool stale_tuning_warned = false;  // the first row of another ktune version is a warning, later ones info
  std::unordered_map<void*, std::string> fingerprints;
  const std::string& fingerprint_of(void* ctx);
  // The tuned config of (family, key) on the device with fingerprint `fp` ("" = none: the miss is counted and
  // logged), memoized so the steady state touches no SQLite; and the entry the tuner sets. `where` names the
  // device in the log line. GPU and host lookups alike.
  std::string tuned_config_for(const std::string& family, const std::string& key, const std::string& fp,
                               const char* where);
  void remember_tuned_config_for(const std::string& family, const std::string& key, const std::string& fp,
                                 const std::string& config);
  void forget_tuned_config_for(const std::string& family, const std::string& key, const std::string& fp);
  std::atomic<uint64_t> tuning_generation{0};  // bumped by remember_tuned_config (internal::tuning_generation)
  // Per-runtime objects of internal::runtime_slot (prepared ops of the one-shot calls), by name.
  std::mutex slots_mutex;
  std::unordered_map<std::string, std::shared_ptr<void>> slots;
  // Checked kernels' fault records by context identity: pinned host memory and its device address
  // (device_report.cpp), and the context that allocated it.
  struct Report {
    void* host = nullptr;
    unsigned long long device = 0;
    void* owner = nullptr;  // a CUcontext
  };
  std::mutex reports_mutex;
  std::unordered_map<void*, Report> reports;
  void free_reports();

  // The binary for (kernel, arch): memory, then cache layers, then the compiler. Sets *compiled (and *key).
  BinaryPtr obtain_binary(const GeneratedKernel& kernel, const Arch& arch, bool* compiled,
                          detail::BinaryKey* key = nullptr);
  // The cache layers' copy of `key`, with copies whose blob lacks the key's symbols quarantined and skipped.
  cache::BinaryLookup lookup(const GeneratedKernel& kernel, const detail::BinaryKey& key);
  // Never use this blob again in this process; delete it from the writable layer if it is there.
  void quarantine(const cache::BinaryRecord& rec, const std::string& why);
  std::string no_writable_layer_reason() const;
  // Offers a binary that an earlier call compiled but could not store to the cache again; "" once it is stored,
  // else why not (and not_stored_by_digest says so).
  std::string retry_store(const cache::BinaryRecord& rec);
  BinaryPtr lookup_or_compile(const GeneratedKernel& kernel, const Arch& arch, const detail::BinaryKey& key,
                              const std::vector<std::string>& options, bool* compiled);
  void dump(const GeneratedKernel& kernel, const detail::BinaryKey& key, const std::vector<uint8_t>& blob);
};

namespace internal {
// What runtime/src reaches a Runtime's state through (Runtime keeps Impl private to the library).
struct RuntimeImplAccess {
  static Runtime::Impl& of(Runtime& rt) { return *rt.impl_; }
  static const Runtime::Impl& of(const Runtime& rt) { return *rt.impl_; }
};
}  // namespace internal

namespace detail {
// The cache layering a runtime with `options` opens: read-only mode and, with trusted_keys, the public keys every
// read-only layer must be signed by. Error(invalid_argument) naming KTUNE_TRUSTED_KEYS for an unusable key list.
cache::LayeredOptions layered_options(const RuntimeOptions& options);

// Loads a CUBIN on `ctx` and resolves `symbols` (binding symbol first). Throws UnloadableBinary when the
// bytes or symbols are at fault, Error(cuda_error) otherwise.
std::unique_ptr<LoadedKernel> load_gpu_module(const cache::BinaryRecord& rec, const BoundSymbols& symbols,
                                              void* ctx);
void unload_gpu_module(void* module);
}  // namespace detail

}  // namespace ktune
