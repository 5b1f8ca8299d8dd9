// The C API: a thin shell over the C++ API that turns exceptions into status codes + a thread-local message.
#include "ktune/ktune.h"

#include <new>
#include <string>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune/xqa_decode.hpp"

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

// Problem keys are parsed once per thread and key: the hot path of a C caller is a string compare.
const ktune::xqa::Problem& xqa_problem(const char* key) {
  thread_local std::string last_key;
  thread_local ktune::xqa::Problem last;
  if (last_key != key) {
    ktune::xqa::Problem p = ktune::xqa::Problem::from_key(key);
    p.validate();
    last = p;
    last_key = key;
  }
  return last;
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

void ktune_xqa_args_default(ktune_xqa_args* a) {
  if (!a) return;
  ktune::XqaDecodeArgs d;
  *a = ktune_xqa_args{d.q, d.kv_cache, d.block_tables, d.seq_lens, d.q_cu_seq_lens, d.mask, d.sinks, d.out, d.lse,
                      d.workspace, d.workspace_bytes, d.batch, d.num_tokens, d.q_len_per_req, d.max_pages_per_req,
                      d.num_pages, d.max_seq_len, d.softmax_scale, d.q_scale, d.k_scale, d.v_scale, d.o_scale,
                      d.softcap, d.window_left, d.config, d.num_splits};
}

ktune_status ktune_xqa_decode_workspace_bytes(ktune_runtime* runtime, const char* problem_key, int batch,
                                              int max_seq_len, size_t* bytes) {
  if (!runtime) return invalid("ktune_xqa_decode_workspace_bytes: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode_workspace_bytes: problem_key must not be NULL");
  if (!bytes) return invalid("ktune_xqa_decode_workspace_bytes: bytes must not be NULL");
  return guarded([&] { *bytes = ktune::xqa_decode_workspace_bytes(runtime->rt, xqa_problem(problem_key), batch, max_seq_len); });
}

ktune_status ktune_xqa_decode(ktune_runtime* runtime, const char* problem_key, const ktune_xqa_args* a, void* stream) {
  if (!runtime) return invalid("ktune_xqa_decode: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode: problem_key must not be NULL");
  if (!a) return invalid("ktune_xqa_decode: args must not be NULL");
  return guarded([&] {
    ktune::XqaDecodeArgs d;
    d.q = a->q; d.kv_cache = a->kv_cache; d.block_tables = a->block_tables; d.seq_lens = a->seq_lens;
    d.q_cu_seq_lens = a->q_cu_seq_lens; d.mask = a->mask; d.sinks = a->sinks; d.out = a->out; d.lse = a->lse;
    d.workspace = a->workspace; d.workspace_bytes = a->workspace_bytes; d.batch = a->batch;
    d.num_tokens = a->num_tokens; d.q_len_per_req = a->q_len_per_req; d.max_pages_per_req = a->max_pages_per_req;
    d.num_pages = a->num_pages; d.max_seq_len = a->max_seq_len; d.softmax_scale = a->softmax_scale;
    d.q_scale = a->q_scale; d.k_scale = a->k_scale; d.v_scale = a->v_scale; d.o_scale = a->o_scale;
    d.softcap = a->softcap; d.window_left = a->window_left; d.config = a->config; d.num_splits = a->num_splits;
    ktune::xqa_decode(runtime->rt, xqa_problem(problem_key), d, stream);
  });
}

ktune_status ktune_use_device(int ordinal) {
  return guarded([&] { ktune::use_device(ordinal); });
}

}  // extern "C"
