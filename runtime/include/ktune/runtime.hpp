// The runtime: generated kernel → binary key → memory / SQLite cache layers → compile (single-flight) →
// module loaded on the caller's CUDA context → typed launch (see launch.hpp).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ktune/arch.hpp"
#include "ktune/export.hpp"
#include "ktune/kernel_spec.hpp"

namespace ktune {

class Runtime;
namespace internal {
struct RuntimeImplAccess;  // runtime/src/runtime_impl.hpp
}

// Environment knobs (README lists them): KTUNE_CACHE (search path of databases, ':'-separated; the first
// writable one receives new entries), KTUNE_CACHE_READONLY=1, KTUNE_JIT=0 (a cache miss is an error, never a
// compile), KTUNE_LOG=debug|info|warn|error, KTUNE_DUMP=DIR (write generated source and binaries there),
// KTUNE_TRUSTED_KEYS=FILE[:FILE...] (public keys from `ktune cache keygen`: every read-only cache layer must
// carry a valid signature by one of them, or it is refused, and the writable layer serves only what this
// process stores; set but empty is an error), KTUNE_CHECKED=1 (bounds-checked kernels).
struct KTUNE_API RuntimeOptions {
  std::string cache_path;   // empty => $KTUNE_CACHE, else ~/.cache/ktune/ktune.db
  bool read_only = false;   // never write to any cache layer
  bool allow_jit = true;    // false => a kernel missing from every layer raises Status::jit_disabled
  std::string dump_dir;     // non-empty => dump generated source + binary of every compile here
  // Set (even to "") => ':'-separated public key files that every read-only layer must be signed by; the
  // writable layer then serves only what this process stores. A value naming no key file, or a key file that
  // cannot be read, is an error at Runtime creation (never a silently unchecked runtime). Unset: no checks.
  std::optional<std::string> trusted_keys;
  bool checked = false;     // KTUNE_CHECKED=1: every family launch uses its bounds-checked kernel variant
                            // (device-side index checks that report instead of faulting; docs/reliability.md)
  // Offline tools: a compiled binary that cannot be stored is an error (Status::cache_error naming the path
  // and why), and after one, every further compile is refused at once instead of repeating the failure.
  // Serving processes leave it false: a binary that compiled but could not be stored still runs from memory.
  bool require_store = false;
  static RuntimeOptions from_env();
};

// Counters since the runtime was created, CUDA and host kernels alike. All monotonic.
struct KTUNE_API RuntimeStats {
  int64_t memory_hits = 0;      // kernel requests served from the in-memory module table
  int64_t cache_hits = 0;       // binaries found in an SQLite layer
  int64_t misses = 0;           // binaries in no layer
  int64_t compiles = 0;         // successful compiles
  int64_t compile_failures = 0;
  int64_t loads = 0;            // modules loaded onto a context
  int64_t damaged_skipped = 0;  // cache entries that failed their integrity check and were not loaded
  int64_t quarantined = 0;      // binaries that did not load or lacked their key's symbols: never used again
  int64_t store_failures = 0;   // binaries compiled but not stored (no writable layer, or the write failed)
  int64_t tuning_misses = 0;    // launches that found no tuned config and used the default
  double compile_ms = 0;        // total wall time spent compiling
  double load_ms = 0;           // total wall time spent in cuModuleLoadData (host: linking the object)
};

// A kernel module loaded on one CUDA context, with its entry points resolved. Owned by the runtime; valid
// until the runtime is destroyed.
// A host kernel (Runtime::get_host) has context == nullptr, module = the host plugin's handle of the linked
// object, and functions = plain function pointers (the signature is the family's: see its host launcher).
struct KTUNE_API LoadedKernel {
  std::string name;                 // readable key: family/arch/problem/config
  std::string digest;               // binary key digest
  void* context = nullptr;          // CUcontext; nullptr for a host kernel
  void* module = nullptr;           // CUmodule; the host plugin's object handle for a host kernel
  std::vector<void*> functions;     // CUfunction per GeneratedKernel::entry_points (dynamic smem limit
                                    // already raised to the device's opt-in maximum at load); for a host
                                    // kernel the entry points' addresses
};

// Result of making sure a binary exists in the cache (no GPU needed).
struct KTUNE_API EnsureResult {
  std::string name;
  std::string digest;
  bool compiled = false;  // false => it was already in a cache layer
  double compile_ms = 0;
  // Compiled but not stored: why (no writable layer, or the write failed); empty when stored or already cached.
  // Offline tools must treat a non-empty value as a failure: the next process would compile it again.
  std::string not_stored;
};

// A fault a checked kernel recorded (see Runtime::take_device_fault).
struct KTUNE_API DeviceFault {
  std::string what;   // "page index" (a block-table entry) or "top-k index"
  unsigned where = 0; // the request (xqa_decode) or token (sparse_mla_decode) it belongs to
  int64_t value = 0;  // the bad index
  int64_t limit = 0;  // valid indices are [0, limit)
  std::string message() const;  // "page index 9000 of request 3 out of range [0, 4096)"
};

class KTUNE_API Runtime {
 public:
  explicit Runtime(RuntimeOptions options = RuntimeOptions::from_env());
  ~Runtime();
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  // The process-wide runtime (options from the environment), created on first use.
  static Runtime& global();

  // Ensures the binary of `kernel` for `arch` is in a cache layer, compiling it if needed. Thread-safe and
  // single-flight: concurrent callers for one missing binary cause exactly one compile. Needs no GPU.
  EnsureResult ensure_binary(const GeneratedKernel& kernel, const Arch& arch);

  // Launch-ready kernel on the calling thread's current CUDA context. `fast_key` identifies the kernel
  // cheaply (e.g. "xqa_decode/<problem>/<config>"); `generate` runs only when this context has not loaded it
  // yet. After the first call for a key this is one hash lookup: no SQLite, no compiler.
  const LoadedKernel& get(const std::string& fast_key, const std::function<GeneratedKernel()>& generate);

  // The tuned config of `family` for tuning `key` on the current context's device, or "" when none was tuned
  // (the caller uses its default config; the miss is counted). Cached in memory after the first lookup, so the
  // steady state touches no SQLite.
  std::string tuned_config(const std::string& family, const std::string& key);
  // Makes a config just chosen by the tuner visible to this runtime's launches.
  void remember_tuned_config(const std::string& family, const std::string& key, const std::string& config);
  // DeviceInfo::fingerprint of the current context's device.
  std::string device_fingerprint();

  // The arch of the current context's device (sm_90a on an H200). Throws no_driver without a GPU.
  Arch current_arch();

  // ---- The host CPU target (Arch "host"), through the optional LLVM plugin libktune_host.so ----
  // (docs/host_backend.md). Binaries for "host" are object files: compiler "llvm", compiler_version = the
  // plugin's target id (triple, CPU name and features, LLVM version), so a cache filled on another CPU misses.
  // ensure_binary() takes Arch "host" like any arch. Without the plugin every host call throws no_compiler.

  // True when the plugin loads; otherwise `why` (if given) says where it was looked for.
  static bool host_available(std::string* why = nullptr);
  // "x86_64-pc-linux-gnu/znver3/+adx,+aes,...;llvm 19.1.7" (the host binaries' compiler_version).
  static std::string host_target_id();
  // Launch-ready host kernel: get() for the CPU. The first call for `fast_key` generates the kernel, finds or
  // compiles its object (memory -> cache layers -> LLVM; single-flight; KTUNE_JIT=0 makes a miss an error) and
  // links it in process with ORC LLJIT; later calls are one hash lookup. LoadedKernel::functions holds the
  // entry points as function pointers; call them directly (on any threads).
  const LoadedKernel& get_host(const std::string& fast_key, const std::function<GeneratedKernel()>& generate);
  // The host "device" fingerprint tuning rows are stored under: target id + core count
  // ("<target id>;cores=16"). A winner tuned on one machine applies to another with the same CPU and cores.
  std::string host_fingerprint();
  // tuned_config / remember_tuned_config for the host device (no CUDA context involved).
  std::string host_tuned_config(const std::string& family, const std::string& key);
  void remember_host_tuned_config(const std::string& family, const std::string& key, const std::string& config);

  // ---- Checked kernels (RuntimeOptions::checked, or a problem marked checked) ----
  // Device address of the current context's fault record (a ktune_common::DeviceReport in pinned, mapped host
  // memory; templates/common/checked.h), which checked kernels write instead of reading out of bounds.
  // Allocated on first use; stable for the runtime's life, so it can be baked into a CUDA graph.
  void* device_report();
  // The first fault recorded on the current context since the last call, or nullopt; clears the record.
  // Call once the launches in question have completed (e.g. after synchronizing their stream).
  std::optional<DeviceFault> take_device_fault();

  RuntimeStats stats() const;
  const RuntimeOptions& options() const;
  // The cache layers as opened: "path (rw)" / "path (ro)" / "path (absent: why)".
  std::vector<std::string> cache_layers() const;
  // The path new binaries and tuning rows go to, or "" when no layer is writable; then *why_none (if given)
  // names the search path and why each layer is not writable.
  std::string writable_cache_layer(std::string* why_none = nullptr) const;
  // Why the latest compiled binary was not stored ("" if every one was): see RuntimeStats::store_failures.
  std::string last_store_failure() const;

  struct Impl;  // runtime/src/runtime_impl.hpp

 private:
  friend struct internal::RuntimeImplAccess;  // the runtime's own sources (runtime/src) reach Impl through it
  std::unique_ptr<Impl> impl_;
};

// Makes the primary context of device `ordinal` current on the calling thread (what PyTorch does too).
// Engines that manage their own contexts never need this.
//
// use_device(kHostDevice) makes the host CPU the calling thread's device instead (the same public
// API on the `host` target): the family launches called on that thread -- xqa_decode, sparse_mla_decode,
// mxfp4_gemm -- then take HOST pointers and run their host variants through the LLVM host backend
// (libktune_host.so), synchronously on all hardware threads; `stream` is ignored. It is exactly the
// corresponding *_host call (xqa_decode_host.hpp, ...). use_device(N >= 0) makes GPU N current again. Without
// the plugin such a launch throws Error(no_compiler).
constexpr int kHostDevice = -1;
KTUNE_API void use_device(int ordinal);
// True on a thread whose last use_device call was use_device(kHostDevice).
KTUNE_API bool host_device_current();

// Version strings.
KTUNE_API const char* version();                 // ktune, "0.2.0"
KTUNE_API std::string nvrtc_version_or_empty();  // "13.0.88", or "" when NVRTC cannot be loaded

}  // namespace ktune
