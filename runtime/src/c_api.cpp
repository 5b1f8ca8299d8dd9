// The C API: a thin shell over the C++ API that turns exceptions into status codes + a thread-local message.
#include "ktune/ktune.h"

#include <cstring>
#include <memory>
#include <new>
#include <string>

#include "ktune/error.hpp"
#include "ktune/family.hpp"
#include "ktune/runtime.hpp"
#include "ktune_internal/c_api.hpp"
#include "ktune/xqa_decode.hpp"
#include "mxfp4_gemm/family.hpp"
#include "sparse_mla_decode/family.hpp"
#include "xqa_decode/family.hpp"

namespace {
using namespace ktune::capi;

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

}  // namespace

extern "C" {

const char* ktune_last_error(void) { return ktune::capi::last_error.c_str(); }
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
  *a = ktune_xqa_args{sizeof(ktune_xqa_args), ktune::c_family_id("xqa_decode"), d.q, d.kv_cache, d.block_tables, d.seq_lens, d.q_cu_seq_lens, d.mask, d.sinks, d.out, d.lse,
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
  if (ktune_status st = check_args_header(a, "xqa_decode", sizeof(*a), "ktune_xqa_decode")) return st;
  return guarded([&] {
    const ktune::xqa::Problem& p = xqa_problem(problem_key);
    ktune::xqa_decode(runtime->rt, p, ktune::xqa::args_from_c(p, *a), stream);
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
#include "ktune/cache/json.hpp"
#include "ktune/xqa_decode_host.hpp"
#include "mxfp4_gemm/spec.hpp"

namespace {


std::string bindings_join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

// The primary context of each device, retained once per process.
std::mutex bindings_ctx_mutex;
std::vector<CUcontext> bindings_primary_ctx;

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
    using ktune::detail::check_cu;
    const ktune::detail::DriverApi& cu = ktune::detail::driver();
    CUcontext want = nullptr;
    {
      std::lock_guard<std::mutex> lock(bindings_ctx_mutex);
      if (ordinal >= 0 && static_cast<size_t>(ordinal) < bindings_primary_ctx.size())
        want = bindings_primary_ctx[static_cast<size_t>(ordinal)];
    }
    CUcontext cur = nullptr;
    if (want && cu.cuCtxGetCurrent(&cur) == CUDA_SUCCESS && cur == want) return;  // the hot path
    if (!want) {
      int count = 0;
      check_cu(cu.cuDeviceGetCount(&count), "cuDeviceGetCount");
      if (ordinal < 0 || ordinal >= count)
        throw ktune::Error(ktune::Status::invalid_argument, "runtime",
                           "device ordinal " + std::to_string(ordinal) + ": expected 0.." + std::to_string(count - 1));
      CUdevice dev = 0;
      check_cu(cu.cuDeviceGet(&dev, ordinal), "cuDeviceGet");
      std::lock_guard<std::mutex> lock(bindings_ctx_mutex);
      if (bindings_primary_ctx.size() <= static_cast<size_t>(ordinal))
        bindings_primary_ctx.resize(static_cast<size_t>(ordinal) + 1, nullptr);
      if (!bindings_primary_ctx[static_cast<size_t>(ordinal)])
        check_cu(cu.cuDevicePrimaryCtxRetain(&bindings_primary_ctx[static_cast<size_t>(ordinal)], dev),
                 "cuDevicePrimaryCtxRetain");
      want = bindings_primary_ctx[static_cast<size_t>(ordinal)];
    }
    check_cu(cu.cuCtxSetCurrent(want), "cuCtxSetCurrent");
  });
}

ktune_status ktune_xqa_decode_workspace_bytes_ex(ktune_runtime* runtime, const char* problem_key, int batch,
                                                 int max_seq_len, const char* config, int num_splits, size_t* bytes) {
  if (!runtime) return invalid("ktune_xqa_decode_workspace_bytes_ex: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode_workspace_bytes_ex: problem_key must not be NULL");
  if (!bytes) return invalid("ktune_xqa_decode_workspace_bytes_ex: bytes must not be NULL");
  return guarded([&] {
    *bytes = ktune::xqa_decode_workspace_bytes(runtime->rt, xqa_problem(problem_key), batch, max_seq_len, config,
                                               num_splits);
  });
}

ktune_status ktune_xqa_decode_host(ktune_runtime* runtime, const char* problem_key, const ktune_xqa_args* a,
                                   int threads) {
  if (!runtime) return invalid("ktune_xqa_decode_host: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode_host: problem_key must not be NULL");
  if (!a) return invalid("ktune_xqa_decode_host: args must not be NULL");
  if (ktune_status st = check_args_header(a, "xqa_decode", sizeof(*a), "ktune_xqa_decode_host")) return st;
  return guarded([&] {
    const ktune::xqa::Problem& p = xqa_problem(problem_key);
    ktune::xqa_decode_host(runtime->rt, p, ktune::xqa::args_from_c(p, *a), threads);
  });
}

ktune_status ktune_xqa_decode_plan(ktune_runtime* runtime, const char* problem_key, int batch, int max_seq_len,
                                   const char* config, int num_splits, int host, int threads, const char** plan_json) {
  if (!runtime) return invalid("ktune_xqa_decode_plan: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_xqa_decode_plan: problem_key must not be NULL");
  if (!plan_json) return invalid("ktune_xqa_decode_plan: plan_json must not be NULL");
  static thread_local std::string result;
  return guarded([&] {
    ktune::cache::Json j = ktune::cache::Json::object();
    if (host) {
      ktune::XqaHostPlan p = ktune::xqa_decode_host_plan(runtime->rt, xqa_problem(problem_key), batch, max_seq_len,
                                                         threads, config, num_splits);
      j.set("config", p.config).set("source", p.source).set("num_splits", p.num_splits)
          .set("workspace_bytes", static_cast<int64_t>(p.workspace_bytes)).set("threads", p.threads);
    } else {
      ktune::XqaDecodePlan p = ktune::xqa_decode_plan(runtime->rt, xqa_problem(problem_key), batch, max_seq_len,
                                                      config, num_splits);
      j.set("config", p.config).set("source", p.source).set("num_splits", p.num_splits)
          .set("workspace_bytes", static_cast<int64_t>(p.workspace_bytes));
    }
    result = j.dump();
    *plan_json = result.c_str();
  });
}

ktune_status ktune_mxfp4_unpack_host(const uint8_t* packed_weight, const uint8_t* packed_scales, int n, int k,
                                     int num_experts, uint8_t* w_packed, uint8_t* w_scale) {
  if (!packed_weight || !packed_scales || !w_packed || !w_scale)
    return invalid("ktune_mxfp4_unpack_host: packed_weight, packed_scales, w_packed and w_scale must not be NULL");
  return guarded([&] { ktune::mxfp4::unpack_host(packed_weight, packed_scales, n, k, num_experts, w_packed, w_scale); });
}

}  // extern "C"
// ---- end of language bindings section -------------------------------------------------------------------

// ---- mxfp4_gemm -----------------------------------------------------------------------------------------
#include "ktune/mxfp4_gemm.hpp"
#include "ktune/mxfp4_gemm_host.hpp"

namespace {

// threads < 0: the GPU call on `stream`; else the host call on that many threads (0: all).
ktune_status mxfp4_call(ktune_runtime* runtime, const char* problem_key, const ktune_mxfp4_args* a, void* stream,
                        bool grouped, const char* fn, int threads = -1) {
  static thread_local std::string msg;
  if (!runtime) return invalid((msg = std::string(fn) + ": runtime must not be NULL").c_str());
  if (!problem_key) return invalid((msg = std::string(fn) + ": problem_key must not be NULL").c_str());
  if (!a) return invalid((msg = std::string(fn) + ": args must not be NULL").c_str());
  if (ktune_status st = check_args_header(a, "mxfp4_gemm", sizeof(*a), fn)) return st;
  return guarded([&] {
    const ktune::mxfp4::Problem p = ktune::mxfp4::Problem::from_key(problem_key);
    if (p.grouped() != grouped)
      throw ktune::Error(ktune::Status::invalid_argument, "mxfp4_gemm",
                         std::string("problem_key: expected a ") + (grouped ? "grouped (num_experts > 1)" : "dense") +
                             " problem for " + fn + ", got '" + problem_key + "'");
    const ktune::Mxfp4GemmArgs d = ktune::mxfp4::args_from_c(p, *a);
    if (threads >= 0) ktune::mxfp4_gemm_host(runtime->rt, p, d, threads);
    else ktune::mxfp4_gemm(runtime->rt, p, d, stream);
  });
}

}  // namespace

extern "C" {

void ktune_mxfp4_args_default(ktune_mxfp4_args* args) {
  if (!args) return;
  *args = ktune_mxfp4_args{};
  args->struct_size = sizeof(ktune_mxfp4_args);
  args->family_id = ktune::c_family_id("mxfp4_gemm");
  args->layout_version = ktune::mxfp4::packed_layout_version();
}

int ktune_mxfp4_layout_version(void) { return ktune::mxfp4::packed_layout_version(); }

ktune_status ktune_mxfp4_packed_bytes(int n, int k, int num_experts, int which, size_t* bytes) {
  if (!bytes) return invalid("ktune_mxfp4_packed_bytes: bytes must not be NULL");
  if (which != 0 && which != 1) return invalid("ktune_mxfp4_packed_bytes: which: expected 0 (weight) or 1 (scales)");
  return guarded([&] {
    *bytes = which == 0 ? ktune::mxfp4::packed_weight_bytes(n, k, num_experts)
                        : ktune::mxfp4::packed_scale_bytes(n, k, num_experts);
  });
}

ktune_status ktune_mxfp4_prepack_host(const uint8_t* w_packed, const uint8_t* w_scale, int n, int k, int num_experts,
                                      uint8_t* out_weight, uint8_t* out_scales) {
  return guarded([&] { ktune::mxfp4::prepack_host(w_packed, w_scale, n, k, num_experts, out_weight, out_scales); });
}

ktune_status ktune_mxfp4_gemm(ktune_runtime* runtime, const char* problem_key, const ktune_mxfp4_args* args,
                              void* stream) {
  return mxfp4_call(runtime, problem_key, args, stream, false, "ktune_mxfp4_gemm");
}

ktune_status ktune_mxfp4_grouped_gemm(ktune_runtime* runtime, const char* problem_key, const ktune_mxfp4_args* args,
                                      void* stream) {
  return mxfp4_call(runtime, problem_key, args, stream, true, "ktune_mxfp4_grouped_gemm");
}

ktune_status ktune_mxfp4_gemm_host(ktune_runtime* runtime, const char* problem_key, const ktune_mxfp4_args* args,
                                   int threads) {
  return mxfp4_call(runtime, problem_key, args, nullptr, false, "ktune_mxfp4_gemm_host", std::max(threads, 0));
}

ktune_status ktune_mxfp4_grouped_gemm_host(ktune_runtime* runtime, const char* problem_key,
                                           const ktune_mxfp4_args* args, int threads) {
  return mxfp4_call(runtime, problem_key, args, nullptr, true, "ktune_mxfp4_grouped_gemm_host", std::max(threads, 0));
}

}  // extern "C"
// ---- end of mxfp4_gemm section ----

// ---- sparse_mla_decode section ----
#include "ktune/sparse_mla_decode.hpp"
#include "ktune/sparse_mla_decode_host.hpp"

namespace {

const ktune::mla::Problem& mla_problem(const char* key) {
  thread_local std::string last_key;
  thread_local ktune::mla::Problem last;
  if (last_key != key) {
    last = ktune::mla::Problem::from_key(key);
    last_key = key;
  }
  return last;
}


}  // namespace

extern "C" {

void ktune_sparse_mla_args_default(ktune_sparse_mla_args* a) {
  if (!a) return;
  const ktune::SparseMlaDecodeArgs d;
  *a = ktune_sparse_mla_args{sizeof(ktune_sparse_mla_args), ktune::c_family_id("sparse_mla_decode"), d.q, d.kv_cache, d.indices, d.sinks, d.out, d.lse, d.workspace, d.workspace_bytes,
                             d.num_tokens, d.num_pages, d.softmax_scale, d.config, d.num_splits};
}

ktune_status ktune_sparse_mla_decode_workspace_bytes(ktune_runtime* runtime, const char* problem_key, int num_tokens,
                                                     const char* config, int num_splits, size_t* bytes) {
  if (!runtime) return invalid("ktune_sparse_mla_decode_workspace_bytes: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_sparse_mla_decode_workspace_bytes: problem_key must not be NULL");
  if (!bytes) return invalid("ktune_sparse_mla_decode_workspace_bytes: bytes must not be NULL");
  return guarded([&] {
    *bytes = ktune::sparse_mla_decode_workspace_bytes(runtime->rt, mla_problem(problem_key), num_tokens, config,
                                                      num_splits);
  });
}

ktune_status ktune_sparse_mla_decode_plan(ktune_runtime* runtime, const char* problem_key, int num_tokens,
                                          const char* config, int num_splits, const char** plan_json) {
  if (!runtime) return invalid("ktune_sparse_mla_decode_plan: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_sparse_mla_decode_plan: problem_key must not be NULL");
  if (!plan_json) return invalid("ktune_sparse_mla_decode_plan: plan_json must not be NULL");
  return guarded([&] {
    const ktune::SparseMlaDecodePlan p =
        ktune::sparse_mla_decode_plan(runtime->rt, mla_problem(problem_key), num_tokens, config, num_splits);
    thread_local std::string text;
    text = "{\"config\": \"" + p.config + "\", \"source\": \"" + p.source +
           "\", \"num_splits\": " + std::to_string(p.num_splits) +
           ", \"workspace_bytes\": " + std::to_string(p.workspace_bytes) + "}";
    *plan_json = text.c_str();
  });
}

ktune_status ktune_sparse_mla_decode(ktune_runtime* runtime, const char* problem_key, const ktune_sparse_mla_args* a,
                                     void* stream) {
  if (!runtime) return invalid("ktune_sparse_mla_decode: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_sparse_mla_decode: problem_key must not be NULL");
  if (!a) return invalid("ktune_sparse_mla_decode: args must not be NULL");
  if (ktune_status st = check_args_header(a, "sparse_mla_decode", sizeof(*a), "ktune_sparse_mla_decode")) return st;
  return guarded([&] {
    const ktune::mla::Problem& p = mla_problem(problem_key);
    ktune::sparse_mla_decode(runtime->rt, p, ktune::mla::args_from_c(p, *a), stream);
  });
}

ktune_status ktune_sparse_mla_decode_host(ktune_runtime* runtime, const char* problem_key,
                                          const ktune_sparse_mla_args* a, int threads) {
  if (!runtime) return invalid("ktune_sparse_mla_decode_host: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_sparse_mla_decode_host: problem_key must not be NULL");
  if (!a) return invalid("ktune_sparse_mla_decode_host: args must not be NULL");
  if (ktune_status st = check_args_header(a, "sparse_mla_decode", sizeof(*a), "ktune_sparse_mla_decode_host"))
    return st;
  return guarded([&] {
    const ktune::mla::Problem& p = mla_problem(problem_key);
    ktune::sparse_mla_decode_host(runtime->rt, p, ktune::mla::args_from_c(p, *a), threads);
  });
}

ktune_status ktune_sparse_mla_decode_host_plan(ktune_runtime* runtime, const char* problem_key, int num_tokens,
                                               const char* config, int num_splits, int threads,
                                               const char** plan_json) {
  if (!runtime) return invalid("ktune_sparse_mla_decode_host_plan: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_sparse_mla_decode_host_plan: problem_key must not be NULL");
  if (!plan_json) return invalid("ktune_sparse_mla_decode_host_plan: plan_json must not be NULL");
  return guarded([&] {
    const ktune::SparseMlaHostPlan p = ktune::sparse_mla_decode_host_plan(runtime->rt, mla_problem(problem_key),
                                                                          num_tokens, threads, config, num_splits);
    thread_local std::string text;
    text = "{\"config\": \"" + p.config + "\", \"source\": \"" + p.source +
           "\", \"num_splits\": " + std::to_string(p.num_splits) +
           ", \"workspace_bytes\": " + std::to_string(p.workspace_bytes) + ", \"threads\": " +
           std::to_string(p.threads) + "}";
    *plan_json = text.c_str();
  });
}

}  // extern "C"
// ---- end of sparse_mla_decode section ----
