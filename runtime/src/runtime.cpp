#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>

#include "key_locks.hpp"
#include "host_compiler.hpp"
#include "host_plugin_api.hpp"
#include "ktune/cache/sha256.hpp"
#include "cache_call.hpp"
#include "ktune/error.hpp"
#include "ktune_internal/log.hpp"
#include "nvrtc_api.hpp"
#include "nvrtc_compiler.hpp"
#include "runtime_impl.hpp"

namespace ktune {
using namespace detail;

namespace {

bool env_flag(const char* name, bool fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  std::string s(v);
  return !(s == "0" || s == "false" || s == "no" || s == "off");
}

}  // namespace

RuntimeOptions RuntimeOptions::from_env() {
  RuntimeOptions o;
  if (const char* p = std::getenv("KTUNE_CACHE")) o.cache_path = p;
  o.read_only = env_flag("KTUNE_CACHE_READONLY", false);
  o.allow_jit = env_flag("KTUNE_JIT", true);
  if (const char* d = std::getenv("KTUNE_DUMP")) o.dump_dir = d;
  if (const char* k = std::getenv("KTUNE_TRUSTED_KEYS")) o.trusted_keys = std::string(k);  // "" is an error
  o.checked = env_flag("KTUNE_CHECKED", false);
  return o;
}

namespace detail {

cache::LayeredOptions layered_options(const RuntimeOptions& options) {
  cache::LayeredOptions layered;
  layered.force_read_only = options.read_only;
  if (options.trusted_keys) {
    const std::string& list = *options.trusted_keys;
    try {
      layered.trusted_keys = cache::read_public_keys(list);
    } catch (const cache::CacheError& e) {
      throw Error(Status::invalid_argument, "cache", fmt::format("KTUNE_TRUSTED_KEYS={}: {}", list, e.what()));
    }
    if (layered.trusted_keys.empty())
      throw Error(Status::invalid_argument, "cache",
                  fmt::format("KTUNE_TRUSTED_KEYS='{}' names no key file: set it to the public key file(s) that "
                              "sign your caches, or unset it to run without signature checks",
                              list));
  }
  return layered;
}

}  // namespace detail

Runtime::Impl::Impl(RuntimeOptions opts) : options(std::move(opts)) {
  std::string path = options.cache_path.empty() ? cache::LayeredCache::default_search_path() : options.cache_path;
  options.cache_path = path;
  const cache::LayeredOptions layered = layered_options(options);
  cache = cache_call([&] { return std::make_unique<cache::LayeredCache>(path, layered); });
  for (const std::string& why : cache->refused()) log(LogLevel::warn, "cache layer not used: {}", why);
  for (const auto& layer : cache->layers()) {
    if (!layer.write_problem.empty()) {
      log(LogLevel::warn, "cache layer {}: cannot store new entries: {}", layer.path, layer.write_problem);
    } else if (layer.writable && !layered.trusted_keys.empty() && !layer.note.empty()) {
      // Rows it holds but will not serve (e.g. an unsigned image listed without ?ro): worth a warning.
      log(LogLevel::warn, "cache layer {}: {}", layer.path, layer.note);
    }
  }
  if (cache::CacheDb* w = cache->writable_layer()) {
    compile_locks = std::make_unique<KeyLocks>(w->path(), ".compile-lock", "compiling");
    if (!compile_locks->enabled()) compile_locks.reset();
    tuning_locks = std::make_unique<KeyLocks>(w->path(), ".tune-lock", "tuning");
    if (!tuning_locks->enabled()) tuning_locks.reset();
  }
}

Runtime::Impl::~Impl() = default;  // modules are unloaded in ~Runtime (module_table.cpp)

// A debugging aid, so best effort: a dump that cannot be written is a warning, never a failed call (the
// binary is compiled and stored either way).
void Runtime::Impl::dump(const GeneratedKernel& kernel, const BinaryKey& key, const std::vector<uint8_t>& blob) {
  if (options.dump_dir.empty()) return;
  std::string stem = key.name;
  for (char& c : stem)
    if (c == '/') c = '_';
  std::error_code ec;
  std::filesystem::create_directories(options.dump_dir, ec);
  const bool host = key.compiler == "llvm";  // host: the translation unit as compiled, and an object file
  const std::string source_path = options.dump_dir + "/" + stem + (host ? ".cpp" : ".cu");
  const std::string binary_path = options.dump_dir + "/" + stem + (host ? ".o" : ".cubin");
  std::ofstream src(source_path);
  src << (host ? host_translation_unit(kernel) : kernel.source);
  std::ofstream bin(binary_path, std::ios::binary);
  bin.write(reinterpret_cast<const char*>(blob.data()), static_cast<std::streamsize>(blob.size()));
  if (!src || !bin) {
    log(LogLevel::warn, "KTUNE_DUMP: could not write {} and {}{}", source_path, binary_path,
        ec ? " (" + ec.message() + ")" : std::string());
    return;
  }
  log(LogLevel::info, "dumped {} to {}", key.name, options.dump_dir);
}

cache::BinaryLookup Runtime::Impl::lookup(const GeneratedKernel& kernel, const BinaryKey& key) {
  const bool have_compiler = !key.compiler_version.empty();
  // A row found under the digest must also agree with the key's own columns (a forged or corrupted row that
  // still hashes to its row digest is skipped as damaged, never loaded).
  cache::BinaryExpectation expect;
  expect.family = key.family;
  expect.arch = key.arch;
  expect.compiler = key.compiler;
  expect.compiler_version = key.compiler_version;
  expect.options = key.options;
  expect.source_digest = key.source_digest;
  expect.ktune_version = key.ktune_version;
  expect.schema_version = key.format_version;
  constexpr int kMaxCopiesTried = 8;  // each unbound copy is quarantined, so the search moves on
  for (int attempt = 1;; ++attempt) {
    cache::BinaryLookup found = cache_call([&] {
      return have_compiler ? cache->get_binary(key.digest, expect)
                           : cache->find_binary_any_compiler_version(key.source_digest, key.arch, key.compiler,
                                                                     key.options, key.ktune_version);
    });
    if (found.damaged_skipped > 0)
      log(LogLevel::warn, "{}: {} damaged cache entr{} skipped (not loaded): {}", key.name, found.damaged_skipped,
          found.damaged_skipped == 1 ? "y was" : "ies were", found.detail);
    if (found.status != cache::LookupStatus::hit) {
      // A copy quarantined earlier may have been deleted from the writable layer: the miss still says why.
      std::lock_guard<std::mutex> lock(binaries_mutex);
      if (auto it = quarantine_notes.find(key.name); it != quarantine_notes.end()) {
        found.status = cache::LookupStatus::damaged;
        found.detail = it->second + (found.detail.empty() ? "" : "; " + found.detail);
      }
      return found;
    }
    // The blob must define the symbols this key expects (read from its symbol table, nothing loaded): a valid
    // blob of another config filed under this row is damaged, not served.
    const std::string why = binding_problem(found.record, kernel.entry_points.size(), key.binding_symbol);
    if (why.empty()) return found;
    if (attempt >= kMaxCopiesTried) {
      found.status = cache::LookupStatus::damaged;
      found.detail = why;
      return found;
    }
    quarantine(found.record, why);
  }
}

BinaryPtr Runtime::Impl::lookup_or_compile(const GeneratedKernel& kernel, const Arch& arch, const BinaryKey& key,
                                           const std::vector<std::string>& opts, bool* compiled) {
  const bool have_compiler = !key.compiler_version.empty();
  cache::BinaryLookup found = lookup(kernel, key);
  if (found.status == cache::LookupStatus::hit) {
    stats.cache_hits++;
    return std::make_shared<const cache::BinaryRecord>(std::move(found.record));
  }
  stats.misses++;
  if (!options.allow_jit) {
    std::string notes;
    if (found.status == cache::LookupStatus::damaged)
      notes += "; the only copies found are damaged or do not load: " + found.detail;
    for (const std::string& why : cache->refused()) notes += "; layer not used: " + why;
    throw Error(Status::jit_disabled, "runtime",
                fmt::format("{} is in no cache layer ({}) and KTUNE_JIT=0 forbids compiling at run time; "
                            "fill the cache ahead of time with `ktune warmup` or `ktune compile`{}",
                            key.name, options.cache_path, notes));
  }
  if (!have_compiler) {
    std::string why;
    try_nvrtc(&why);
    throw Error(Status::no_compiler, "runtime", fmt::format("{} is in no cache layer and {}", key.name, why));
  }

  if (options.require_store) {
    std::lock_guard<std::mutex> lock(binaries_mutex);
    if (!last_store_failure.empty())
      throw Error(Status::cache_error, "runtime",
                  fmt::format("{}: not compiled, because an earlier result could not be stored ({})", key.name,
                              last_store_failure));
  }

  // Other processes warming the same cache: the first to take this key's lock compiles, the others wait and
  // find its row on the second look.
  KeyLocks::Held flight;
  if (compile_locks) {
    std::string note;
    flight = compile_locks->acquire(key.digest, kCompileLockWait_s, &note);
    if (!note.empty()) log(LogLevel::warn, "{}: {}", key.name, note);
    // Look again when another process may have stored it since: it held the lock, or our miss was plain (it
    // may have stored and released between our lookup and our lock). A damaged copy met without waiting is
    // not looked at (and counted) twice.
    if (flight.held() && (flight.waited() || found.status == cache::LookupStatus::miss)) {
      found = lookup(kernel, key);
      if (found.status == cache::LookupStatus::hit) {
        stats.cache_hits++;
        return std::make_shared<const cache::BinaryRecord>(std::move(found.record));
      }
    }
  }

  const GeneratedKernel bound = bound_kernel(kernel, key, arch.host);
  CompiledBinary bin;
  try {
    bin = arch.host ? compile_on_host(bound, opts) : compile_with_nvrtc(bound, arch, opts);
  } catch (...) {
    stats.compile_failures++;
    throw;
  }
  stats.compiles++;
  stats.compile_us += static_cast<int64_t>(bin.compile_ms * 1000);
  if (!bin.log.empty()) log(LogLevel::debug, "{} compiled with messages:\n{}", key.name, bin.log);
  dump(bound, key, bin.cubin);

  auto rec = std::make_shared<cache::BinaryRecord>();
  rec->digest = key.digest;
  rec->family = key.family;
  rec->name = key.name;
  rec->arch = key.arch;
  rec->compiler = key.compiler;
  rec->compiler_version = key.compiler_version;
  rec->options = key.options;
  rec->source_digest = key.source_digest;
  rec->ktune_version = key.ktune_version;
  rec->schema_version = key.format_version;
  rec->entry_points = entry_points_column(bin.lowered_names, key);
  rec->blob = std::move(bin.cubin);
  rec->compile_ms = bin.compile_ms;
  rec->created_at = static_cast<int64_t>(std::time(nullptr));
  std::string not_stored;
  if (cache->writable_layer()) {
    // Storing is best effort for a launch: the binary is good, and a full disk or a damaged file must not fail
    // it. Offline commands read EnsureResult::stored and fail instead.
    try {
      cache->put_binary(*rec);
    } catch (const cache::CacheError& e) {
      not_stored = e.what();
      log(LogLevel::warn, "{}: compiled, but storing it in the cache failed (it lives in memory only): {}",
          key.name, e.what());
    }
  } else {
    not_stored = no_writable_layer_reason();
    log(LogLevel::info, "{}: no writable cache layer; the compiled binary lives in memory only", key.name);
  }
  if (!not_stored.empty()) {
    stats.store_failures++;
    std::lock_guard<std::mutex> lock(binaries_mutex);
    not_stored_by_digest[key.digest] = not_stored;
    last_store_failure = key.name + ": " + not_stored;
    if (options.require_store)
      throw Error(Status::cache_error, "runtime", fmt::format("{}: compiled but not stored: {}", key.name, not_stored));
  }
  *compiled = true;
  return rec;
}

std::string Runtime::Impl::no_writable_layer_reason() const {
  if (std::string problem = cache->write_problem(); !problem.empty()) return problem;
  std::string why;  // opened read-only on purpose (KTUNE_CACHE_READONLY=1): every layer and why
  for (const auto& l : cache->layers())
    why += fmt::format("{}{}: {}", why.empty() ? "" : "; ", l.path, l.note.empty() ? "not writable" : l.note);
  return fmt::format("no writable cache layer in {} ({})", options.cache_path, why.empty() ? "no layers" : why);
}

void Runtime::Impl::quarantine(const cache::BinaryRecord& rec, const std::string& why) {
  {
    std::lock_guard<std::mutex> lock(binaries_mutex);
    // Whatever key it is filed under: without NVRTC a lookup files the row it found (its own digest, with its
    // compiler version) under a key computed with none. Rare, so a scan.
    for (auto it = binaries.begin(); it != binaries.end();)
      it = it->second.get() == &rec ? binaries.erase(it) : std::next(it);
    std::string& note = quarantine_notes[rec.name];
    note += fmt::format("{}quarantined {} ({}): {}", note.empty() ? "" : "; ", rec.name, rec.digest, why);
  }
  stats.quarantined++;
  const std::string blob_sha =
      rec.blob_sha256.empty() ? cache::sha256_hex(rec.blob.data(), rec.blob.size()) : rec.blob_sha256;
  const std::string done = cache->quarantine(rec.digest, blob_sha, why);
  log(LogLevel::warn, "{}: quarantined, not used again by this process{}: {}", rec.name, done, why);
}

BinaryPtr Runtime::Impl::obtain_binary(const GeneratedKernel& kernel, const Arch& arch, bool* compiled,
                                       BinaryKey* key_out) {
  *compiled = false;
  std::vector<std::string> opts;
  BinaryKey key;
  if (arch.host) {
    // Host: the LLVM plugin's target id is the compiler version. Without the plugin there is nothing to look
    // up by (the CPU is unknown) and nothing to load with: a clear error, not a lookup by other columns.
    const HostPlugin& hp = host_plugin();
    opts = host_options(kernel);
    key = derive_binary_key(kernel, arch, "llvm", hp.target_id, opts);
  } else {
    const NvrtcApi* api = try_nvrtc();
    opts = nvrtc_options(kernel, arch);
    key = derive_binary_key(kernel, arch, "nvrtc", api ? api->version : "", opts);
  }
  if (key_out) *key_out = key;

  std::promise<BinaryPtr> promise;
  std::shared_future<BinaryPtr> waiting;
  {
    std::lock_guard<std::mutex> lock(binaries_mutex);
    if (auto it = binaries.find(key.digest); it != binaries.end()) return it->second;
    if (auto it = binaries_in_flight.find(key.digest); it != binaries_in_flight.end()) {
      waiting = it->second;
    } else {
      binaries_in_flight.emplace(key.digest, promise.get_future().share());
    }
  }
  if (waiting.valid()) return waiting.get();  // another thread is on it; rethrows its error too

  try {
    BinaryPtr rec = lookup_or_compile(kernel, arch, key, opts, compiled);
    std::lock_guard<std::mutex> lock(binaries_mutex);
    binaries.emplace(key.digest, rec);
    binaries_in_flight.erase(key.digest);
    promise.set_value(rec);
    return rec;
  } catch (...) {
    std::lock_guard<std::mutex> lock(binaries_mutex);
    binaries_in_flight.erase(key.digest);  // a later call may retry (e.g. after the cache is fixed)
    promise.set_exception(std::current_exception());
    throw;
  }
}

Runtime::Runtime(RuntimeOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

Runtime& Runtime::global() {
  // Never destroyed: modules must not be unloaded after the driver has torn contexts down at exit.
  static Runtime* rt = new Runtime(RuntimeOptions::from_env());
  return *rt;
}

EnsureResult Runtime::ensure_binary(const GeneratedKernel& kernel, const Arch& arch) {
  bool compiled = false;
  BinaryPtr rec = impl_->obtain_binary(kernel, arch, &compiled);
  EnsureResult r;
  r.name = rec->name;
  r.digest = rec->digest;
  r.compiled = compiled;
  r.compile_ms = compiled ? rec->compile_ms : 0;
  {
    std::lock_guard<std::mutex> lock(impl_->binaries_mutex);
    if (auto it = impl_->not_stored_by_digest.find(rec->digest); it != impl_->not_stored_by_digest.end())
      r.not_stored = it->second;
  }
  // ensure_binary promises a cache entry: a binary an earlier call kept in memory only (a lock held past the
  // wait, a full disk) is offered to the cache again, since the cause may have passed.
  if (!r.not_stored.empty() && !compiled) r.not_stored = impl_->retry_store(*rec);
  return r;
}

std::string Runtime::Impl::retry_store(const cache::BinaryRecord& rec) {
  std::string why;
  if (cache->writable_layer()) {
    try {
      cache->put_binary(rec);
    } catch (const cache::CacheError& e) {
      why = e.what();
    }
  } else {
    why = no_writable_layer_reason();
  }
  std::lock_guard<std::mutex> lock(binaries_mutex);
  if (why.empty()) {
    not_stored_by_digest.erase(rec.digest);
    log(LogLevel::info, "{}: stored in the cache on a later try", rec.name);
  } else {
    not_stored_by_digest[rec.digest] = why;
  }
  return why;
}

RuntimeStats Runtime::stats() const {
  const AtomicStats& s = impl_->stats;
  RuntimeStats r;
  r.memory_hits = s.memory_hits;
  r.cache_hits = s.cache_hits;
  r.misses = s.misses;
  r.compiles = s.compiles;
  r.compile_failures = s.compile_failures;
  r.loads = s.loads;
  r.damaged_skipped = impl_->cache->damaged_seen();
  r.quarantined = s.quarantined;
  r.store_failures = s.store_failures;
  r.tuning_misses = s.tuning_misses;
  r.compile_ms = s.compile_us / 1000.0;
  r.load_ms = s.load_us / 1000.0;
  return r;
}

const RuntimeOptions& Runtime::options() const { return impl_->options; }

std::vector<std::string> Runtime::cache_layers() const {
  std::vector<std::string> out;
  for (const auto& l : impl_->cache->layers()) {
    if (!l.present)
      out.push_back(fmt::format("{} (absent{}{})", l.path, l.note.empty() ? "" : ": ", l.note));
    else if (!l.open)
      out.push_back(fmt::format("{} (not used: {})", l.path, l.note));
    else
      out.push_back(fmt::format("{} ({})", l.path, l.writable ? "rw" : "ro"));
  }
  return out;
}

std::string Runtime::writable_cache_layer(std::string* why_none) const {
  if (cache::CacheDb* w = impl_->cache->writable_layer()) return w->path();
  if (why_none) *why_none = impl_->no_writable_layer_reason();
  return {};
}

std::string Runtime::last_store_failure() const {
  std::lock_guard<std::mutex> lock(impl_->binaries_mutex);
  return impl_->last_store_failure;
}

const char* version() { return KTUNE_VERSION_STRING; }

std::string nvrtc_version_or_empty() {
  const NvrtcApi* api = try_nvrtc();
  return api ? api->version : std::string();
}

}  // namespace ktune
