// The C API of sparse_mla_decode (ktune.h): its argument struct, the one-shot GPU and host calls, workspace and plans.
#include "ktune/ktune.h"

#include <string>
#include <vector>

#include "ktune/error.hpp"
#include "ktune/sparse_mla_decode.hpp"
#include "ktune/sparse_mla_decode_host.hpp"
#include "c_op.hpp"
#include "ktune_internal/c_api.hpp"
#include "sparse_mla_decode/family.hpp"

namespace {

const std::vector<uint32_t> kOlderSizes = {ktune::mla::kCArgsSizeBeforeStrides};
using namespace ktune::capi;

const ktune::mla::Problem& mla_problem(const char* key) {
  return ktune::problem_for_key<ktune::mla::Problem>(key, [](const char* k) { return ktune::mla::Problem::from_key(k); });
}

}  // namespace

extern "C" {

ktune_status ktune_sparse_mla_args_init(ktune_sparse_mla_args* a, size_t struct_size) {
  const ktune::SparseMlaDecodeArgs d;
  const ktune_sparse_mla_args defaults{sizeof(ktune_sparse_mla_args), ktune::c_family_id("sparse_mla_decode"), d.q, d.kv_cache, d.indices, d.sinks, d.out, d.lse, d.workspace, d.workspace_bytes,
                             d.num_tokens, d.num_pages, d.softmax_scale, d.config, d.num_splits,
                             d.q_stride_token, d.q_stride_head};
  return init_c_struct(a, struct_size, defaults, "ktune_sparse_mla_args_init", kOlderSizes);
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
    thread_local std::string text;
    text = ktune::plan_json(ktune::sparse_mla_decode_plan(runtime->rt, mla_problem(problem_key), num_tokens, config,
                                                          num_splits))
               .dump();
    *plan_json = text.c_str();
  });
}

ktune_status ktune_sparse_mla_decode(ktune_runtime* runtime, const char* problem_key, const ktune_sparse_mla_args* a,
                                     void* stream) {
  if (!runtime) return invalid("ktune_sparse_mla_decode: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_sparse_mla_decode: problem_key must not be NULL");
  if (!a) return invalid("ktune_sparse_mla_decode: args must not be NULL");
  if (ktune_status st = check_args_header(a, "sparse_mla_decode", sizeof(*a), "ktune_sparse_mla_decode", kOlderSizes))
    return st;
  return guarded([&] {
    const ktune::mla::Problem& p = mla_problem(problem_key);
    ktune::sparse_mla_decode(runtime->rt, p, ktune::mla::args_from_c(p, ktune::read_c_args<ktune_sparse_mla_args>(a)),
                             stream);
  });
}

ktune_status ktune_sparse_mla_decode_host(ktune_runtime* runtime, const char* problem_key,
                                          const ktune_sparse_mla_args* a, int threads) {
  if (!runtime) return invalid("ktune_sparse_mla_decode_host: runtime must not be NULL");
  if (!problem_key) return invalid("ktune_sparse_mla_decode_host: problem_key must not be NULL");
  if (!a) return invalid("ktune_sparse_mla_decode_host: args must not be NULL");
  if (ktune_status st =
          check_args_header(a, "sparse_mla_decode", sizeof(*a), "ktune_sparse_mla_decode_host", kOlderSizes))
    return st;
  return guarded([&] {
    const ktune::mla::Problem& p = mla_problem(problem_key);
    ktune::sparse_mla_decode_host(runtime->rt, p,
                                  ktune::mla::args_from_c(p, ktune::read_c_args<ktune_sparse_mla_args>(a)), threads);
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
