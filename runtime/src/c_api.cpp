// The C API: a thin shell over the C++ API that turns exceptions into status codes + a thread-local message.
// Here: errors, runtimes, compile, devices, problem keys and family names. Each family's own entry points live
// in its folder (templates/<family>/c_api.cpp), the prepared ops in c_api_ops.cpp, warmup in autotune/.
#include "ktune/ktune.h"

#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <set>
#include <string>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune_internal/c_api.hpp"

namespace {
using namespace ktune::capi;
}  // namespace

namespace {

// A path that stays valid for the life of the process: options filled on one thread may be used on another, after
// the first has exited, or after a later fill with other environment values. One copy per distinct path.
const char* interned(const std::string& s) {
  static std::mutex mutex;
  static std::set<std::string>* paths = new std::set<std::string>;  // never freed: callers may hold its pointers
  std::lock_guard<std::mutex> lock(mutex);
  return paths->insert(s).first->c_str();
}

}  // namespace

extern "C" {

const char* ktune_last_error(void) { return ktune::capi::last_error.c_str(); }
const char* ktune_version(void) { return ktune::version(); }
const char* ktune_status_name(ktune_status status) {
  return ktune::status_name(static_cast<ktune::Status>(status));
}

void ktune_runtime_options_default(ktune_runtime_options* options) {
  if (!options) return;
  ktune::RuntimeOptions o = ktune::RuntimeOptions::from_env();
  options->cache_path = o.cache_path.empty() ? nullptr : interned(o.cache_path);
  options->read_only = o.read_only;
  options->allow_jit = o.allow_jit;
}

ktune_status ktune_runtime_create(const ktune_runtime_options* options, ktune_runtime** out) {
  if (!out) return invalid("ktune_runtime_create: out must not be NULL");
  *out = nullptr;
  return guarded([&] {
    ktune::RuntimeOptions o = ktune::RuntimeOptions::from_env();
    if (options) {
      o.cache_path = options->cache_path ? options->cache_path : "";
      o.read_only = options->read_only != 0;
      o.allow_jit = options->allow_jit != 0;
    }
    *out = new ktune_runtime(std::move(o));
  });
}

void ktune_runtime_destroy(ktune_runtime* runtime) { delete runtime; }

ktune_status ktune_runtime_stats(const ktune_runtime* runtime, ktune_stats* out) {
  if (!runtime) return invalid("ktune_runtime_stats: runtime must not be NULL");
  if (!out) return invalid("ktune_runtime_stats: out must not be NULL");
  return guarded([&] {
    ktune::RuntimeStats s = runtime->rt.stats();
    *out = ktune_stats{s.memory_hits, s.cache_hits,      s.misses,        s.compiles,   s.compile_failures,
                       s.loads,       s.damaged_skipped, s.tuning_misses, s.compile_ms, s.load_ms};
  });
}

ktune_status ktune_compile(ktune_runtime* runtime, const char* family, const char* problem_key,
                           const char* config_key, const char* arch, int* compiled) {
  if (!runtime) return invalid("ktune_compile: runtime must not be NULL");
  if (!family) return invalid("ktune_compile: family must not be NULL");
  if (!problem_key) return invalid("ktune_compile: problem_key must not be NULL");
  if (!arch) return invalid("ktune_compile: arch must not be NULL");
  return guarded([&] {
    const ktune::FamilyInfo& f = ktune::family(family);
    ktune::Arch a = ktune::Arch::parse(arch);
    std::string problem = f.canonical_problem(problem_key);
    std::string config = config_key ? std::string(config_key) : f.default_config(problem, a);
    bool any = false;
    std::string not_stored;  // the first module the cache did not take, and why
    auto ensure = [&](const std::string& cfg) {
      ktune::EnsureResult r = runtime->rt.ensure_binary(f.generate(problem, cfg, a), a);
      any = any || r.compiled;
      if (!r.not_stored.empty() && not_stored.empty()) not_stored = r.name + ": " + r.not_stored;
    };
    ensure(config);
    for (const std::string& shared : ktune::shared_module_configs(f, problem, a)) ensure(shared);
    if (compiled) *compiled = any ? 1 : 0;
    // What ktune_compile promises is a cache entry: a binary kept in this process's memory only is not one.
    if (!not_stored.empty())
      throw ktune::Error(ktune::Status::cache_error, "compile",
                         "compiled, but not stored in the cache (usable in this process only): " + not_stored);
  });
}

ktune_status ktune_use_device(int ordinal) {
  return guarded([&] { ktune::use_device(ordinal); });
}

}  // extern "C"

// ---- Language bindings (python/, docs/python.md) ---------------------------------------------------------
// Own includes and helpers, kept together so this section can be read (and moved) as one piece.
#include <cstring>
#include <mutex>
#include <vector>

#include "driver_api.hpp"

namespace {

std::string bindings_join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

}  // namespace

extern "C" {

ktune_status ktune_problem_key(const char* family, const char* key_or_json, const char** key) {
  if (!family) return invalid("ktune_problem_key: family must not be NULL");
  if (!key_or_json) return invalid("ktune_problem_key: key_or_json must not be NULL");
  if (!key) return invalid("ktune_problem_key: key must not be NULL");
  static thread_local std::string result;
  return guarded([&] {
    const ktune::FamilyInfo& f = ktune::family(family);
    std::string text(key_or_json);
    size_t first = text.find_first_not_of(" \t\r\n");
    bool json = first != std::string::npos && text[first] == '{';
    result = json ? f.problem_from_json(text) : f.canonical_problem(text);
    *key = result.c_str();
  });
}

ktune_status ktune_family_names(const char** names) {
  if (!names) return invalid("ktune_family_names: names must not be NULL");
  static thread_local std::string result;
  return guarded([&] {
    std::vector<std::string> v;
    for (const auto& f : ktune::families()) v.push_back(f.name);
    result = bindings_join(v);
    *names = result.c_str();
  });
}

ktune_status ktune_ensure_device(int ordinal) {
  return guarded([&] {
    // The hot path: the GPU's retained primary context is current already, on a thread not on the host device
    // (after the host, the thread's host flag must be cleared too: a context switch alone would leave it set, and
    // the next launch would take device pointers as host memory). Anything else is use_device's.
    CUcontext want = ktune::detail::known_primary_context(ordinal), cur = nullptr;
    if (want && !ktune::host_device_current() && ktune::detail::driver().cuCtxGetCurrent(&cur) == CUDA_SUCCESS &&
        cur == want)
      return;
    ktune::use_device(ordinal);
  });
}

}  // extern "C"
