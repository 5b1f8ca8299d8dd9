// The C API: a thin shell over the C++ API that turns exceptions into status codes + a thread-local message.
#include "ktune/ktune.h"

#include <new>
#include <string>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"

struct ktune_runtime {
  ktune::Runtime rt;
  explicit ktune_runtime(ktune::RuntimeOptions o) : rt(std::move(o)) {}
};

namespace {

thread_local std::string last_error;

template <class F>
ktune_status guarded(F&& f) {
  try {
    f();
    last_error.clear();
    return KTUNE_OK;
  } catch (const ktune::Error& e) {
    last_error = e.what();
    return static_cast<ktune_status>(e.status());
  } catch (const std::bad_alloc&) {
    last_error = "ktune: out of host memory";
    return KTUNE_ERROR_INTERNAL;
  } catch (const std::exception& e) {
    last_error = std::string("ktune internal: ") + e.what();
    return KTUNE_ERROR_INTERNAL;
  } catch (...) {
    last_error = "ktune internal: unknown exception";
    return KTUNE_ERROR_INTERNAL;
  }
}

ktune_status invalid(const char* what) {
  last_error = std::string("ktune api: ") + what;
  return KTUNE_ERROR_INVALID_ARGUMENT;
}

}  // namespace

extern "C" {

const char* ktune_last_error(void) { return last_error.c_str(); }
const char* ktune_version(void) { return ktune::version(); }
const char* ktune_status_name(ktune_status status) {
  return ktune::status_name(static_cast<ktune::Status>(status));
}

void ktune_runtime_options_default(ktune_runtime_options* options) {
  if (!options) return;
  static thread_local std::string path;
  ktune::RuntimeOptions o = ktune::RuntimeOptions::from_env();
  path = o.cache_path;
  options->cache_path = path.empty() ? nullptr : path.c_str();
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
    ktune::EnsureResult r = runtime->rt.ensure_binary(f.generate(problem, config, a), a);
    if (compiled) *compiled = r.compiled ? 1 : 0;
  });
}

ktune_status ktune_use_device(int ordinal) {
  return guarded([&] { ktune::use_device(ordinal); });
}

}  // extern "C"
